#!/usr/bin/env bash
# Wall time of `make quickstart` with nothing cached (fresh results and report folders; the venv installed).
# Usage: bash tests/benchmarks/quickstart_wall.sh     Prints the total and the per-stage times.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SECONDS=0
make quickstart STORAGE="$tmp/results" REPORT="$tmp/report" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
total=$SECONDS
zoo=$(grep -o '^\[zoo [0-9]*/[0-9]* *[0-9]*s\]' "$tmp/log" | tail -n 1 || true)
stitch=$(grep -o '^\[stitch [0-9]*/[0-9]* *[0-9]*s\]' "$tmp/log" | tail -n 1 || true)
echo "machine: $(nproc) CPUs, $(python3 -c 'import platform; print(platform.processor() or platform.machine())')"
echo "last zoo line:    $zoo"
echo "last stitch line: $stitch"
grep -E '^sweep quickstart: [0-9]+ trials: ' "$tmp/log"
echo "make quickstart wall time: ${total} s"
