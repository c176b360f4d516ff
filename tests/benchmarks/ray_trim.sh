#!/usr/bin/env bash
# An offline GPU machine without Ray (tests/benchmarks/gpu_path.py's, docs/performance.md "The GPU path") gets it so.
# Build a trimmed Ray 2.60.0 site folder for Ray Tune on one node (plus `ray.init(address=...)` clusters).
# Usage: tests/benchmarks/ray_trim.sh <ray wheel> <site dir to create> <deps dir of wheels to unpack into it>
# Reproduce the cp312 carry:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
#     -d /tmp/raytrim ray==2.60.0
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
#     -d /tmp/raytrim/deps pydantic==2.14.4 pydantic_core==2.50.5 annotated_types==0.8.0 \
#     typing_inspection==0.4.5 typing_extensions==4.16.0 tensorboardX==2.6.5
#   bash tests/benchmarks/ray_trim.sh /tmp/raytrim/ray-2.60.0-cp312-*.whl /tmp/raytrim/site /tmp/raytrim/deps
#   tar -C /tmp/raytrim/site --owner=0 --group=0 --sort=name -cf - . | xz -9e -T0 > .ray_carry/ray312.tar.xz
# Unpack (target): python3 -c "import tarfile; tarfile.open('.ray_carry/ray312.tar.xz').extractall('/tmp/site')"
# then run with PYTHONPATH=/tmp/site (required: Ray's spawned processes must find ray too).
set -euo pipefail
WHEEL=$1; SITE=$2; DEPS=$3
rm -rf "$SITE"; mkdir -p "$SITE"
unzip -q "$WHEEL" -d "$SITE"
R=$SITE/ray

# Not needed by Tune/Train on a node or a Ray cluster started with `ray start`/`ray.init`:
rm -rf "$R/jars"                 # Java worker support (34 MB)
rm -rf "$R/rllib" "$R/serve" "$R/llm"
# ray.data is KEPT: ray/air/__init__.py does `import ray.data` at module level and ray.train/ray.tune import ray.air.
# Dashboard web UI: keep index.html/favicon/manifest so setup_static_dir() still finds a build dir; drop the assets.
rm -rf "$R/dashboard/client/build/static" "$R/dashboard/client/build/speedscope-1.5.3"
mkdir -p "$R/dashboard/client/build/static"
# Example scripts (only referenced in docstrings) and any test folders.
rm -rf "$R/tune/examples" "$R/train/examples" "$R/train/v2/examples" "$R/air/examples"
find "$R" -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} +
# Cython headers / sources, unused at run time.
find "$R" -type f \( -name '*.pxd' -o -name '*.pxi' -o -name '*.pyx' \) -delete

# Strip every ELF file (gcs_server, raylet, _raylet.so, libjemalloc.so, vendored aiohttp/psutil extensions, ...).
find "$R" -type f \( -name '*.so' -o -name '*.so.*' -o -perm -u+x \) -print0 |
  while IFS= read -r -d '' f; do
    if head -c4 "$f" | grep -q $'\x7fELF'; then strip --strip-unneeded "$f"; fi
  done

# Extra runtime deps missing from the target (pydantic: hard import in ray.train; tensorboardX: Tune extra).
shopt -s nullglob
for w in "$DEPS"/*.whl; do unzip -q -o "$w" -d "$SITE"; done
find "$SITE" -type f \( -name '*.so' \) ! -path "$R/*" -exec strip --strip-unneeded {} +
# Make sure the binaries Ray launches are executable.
chmod +x "$R/core/src/ray/gcs/gcs_server" "$R/core/src/ray/raylet/raylet"
find "$SITE" -type f -name '*.so' -exec chmod +x {} +
du -sh "$SITE"
