"""Refresh `requirements.lock`: every package `pip install '.[test,tracking]'` would install here, with its hash.

Run as `make lock` (Python 3.11, x86_64: the machines the lock is for). It asks pip itself to resolve
(`pip install --dry-run --ignore-installed --report`), so the machine's pip configuration applies: torch and
torchvision come from the local wheel files the configuration points at, not as multi-GB downloads.
pyproject.toml states ranges (for installing into an environment of one's own); `constraints.txt` holds the
exact releases this project's machines use (torch==2.14.1, torchvision==0.29.1, Ray, ...), given to pip as
constraints (`-c`), so the lock keeps them and never resolves to a newer torch's CUDA wheels.
The lock pins the exact file pip chose for each package (name==version --hash=sha256:...); `make install`
then installs with `--require-hashes --no-deps`, so a fresh clone gets the same environment every day.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = "stitchsweep"
CONSTRAINTS = REPO / "constraints.txt"


def main() -> int:
    out = REPO / "requirements.lock"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--disable-pip-version-check",
                "--report",
                str(report),
                "-c",
                str(CONSTRAINTS),
                f"{REPO}[test,tracking]",
            ],
            check=True,
        )
        items = json.loads(report.read_text())["install"]
    lines = [
        "# The whole test environment, resolved by pip on Python"
        f" {platform.python_version()} / {platform.machine()}, with hashes.",
        "# Installed by `make install` (pip --require-hashes --no-deps). Refresh with `make lock`.",
    ]
    for item in sorted(items, key=lambda i: i["metadata"]["name"].lower()):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if name.lower() == PROJECT:
            continue
        hashes = item["download_info"].get("archive_info", {}).get("hashes", {})
        if "sha256" not in hashes:
            print(f"lock: {name} {version} came without a sha256 ({item['download_info']})", file=sys.stderr)
            return 1
        lines.append(f"{name}=={version} --hash=sha256:{hashes['sha256']}")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(lines) - 2} packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
