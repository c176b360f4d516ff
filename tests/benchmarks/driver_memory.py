"""Driver memory over a long sweep: Ray Tune's default logger callbacks versus stitchsweep's settings.

Runs N trivial Tune trials (each reports one metric and returns; 0.25 CPU each) in a fresh process per variant
and samples the driver's resident memory (RSS) every 0.2 s:
  defaults   : a plain tune.Tuner with Ray 2.60's defaults (JSON / CSV / TensorBoard logger callbacks on)
  stitchsweep: the engine's own experiment (`ray_backend._experiment`: TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1,
               verbose 0, our one-line progress callback, the feed, `Prune`), one stage of N units

    .venv/bin/python tests/benchmarks/driver_memory.py [N] [VARIANT ...]   # N: 2000; VARIANT: both
Prints one line per variant: trials, wall time, RSS at start, peak and end, and the growth per 1000 trials.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

VARIANT = r"""
import json, os, sys, threading, time
import psutil
import torch  # both variants: the engine's driver imports it too, so baselines compare
variant, n, storage = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if variant == "stitchsweep":
    from sweep.backends import ray as ray_backend  # sets the logger switches before Tune is imported
    from sweep.store.results import SweepDir
import ray
from ray import tune

proc = psutil.Process()
samples = []
stop = threading.Event()
def sample():
    last = 0.0
    while not stop.is_set():
        samples.append(proc.memory_info().rss)
        if time.perf_counter() - last >= 60:  # a progress line: the log shows the growth as it happens
            last = time.perf_counter()
            print(f"rss-sample t={last - t0:.0f}s rss_mb={samples[-1] / 2**20:.0f}", flush=True)
        time.sleep(0.2)

CPU = 0.25  # a trivial trial needs little: several run at once, as cheap trials of a real sweep would

def trivial(config):  # the engine's stage feeds {"unit": id}; the plain Tuner's grid, {"i": id}
    tune.report({"status": "done", "value": int(config.get("unit", config.get("i")))})

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
start = proc.memory_info().rss
t0 = time.perf_counter()
threading.Thread(target=sample, daemon=True).start()
grid = [str(i) for i in range(n)]
if variant == "stitchsweep":
    sweep_dir = SweepDir(storage, "bench")
    sweep_dir.create()
    from sweep.backends.progress import SweepProgress
    from sweep.backends.events import StageEvents

    class OneStage(StageEvents):  # what `_experiment` asks of the run's stages, for one stage
        left = [("bench", grid)]
        next = lambda self: self.left.pop(0) if self.left else None  # noqa: E731
        interrupted = lambda self: None  # noqa: E731
    progress = OneStage("bench", "bench", n, lambda c: c["unit"], SweepProgress({"bench": ("trial", n)}))
    progress.errored = lambda: 0
    ray_backend._experiment("bench", trivial, progress, {"cpu": CPU}, sweep_dir, 8)
else:
    tune.Tuner(tune.with_resources(trivial, {"cpu": CPU}), param_space={"i": tune.grid_search(grid)},
               run_config=tune.RunConfig(name="bench", storage_path=storage)).fit()
wall = time.perf_counter() - t0
stop.set()
end = proc.memory_info().rss
print(json.dumps({"variant": variant, "trials": n, "wall_s": round(wall, 1), "rss_start_mb": start / 2**20,
                  "rss_peak_mb": max(samples + [end]) / 2**20, "rss_end_mb": end / 2**20}))
ray.shutdown()
"""


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for variant in sys.argv[2:] or ("defaults", "stitchsweep"):
        with tempfile.TemporaryDirectory() as storage:
            env = dict(os.environ)
            env.pop("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", None)
            log = Path(tempfile.gettempdir()) / f"driver_memory-{variant}-{n}.log"  # the child's output, live
            with open(log, "w") as fh:
                rc = subprocess.run(
                    [sys.executable, "-c", VARIANT, variant, str(n), storage],
                    env=env,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                ).returncode
            out = log.read_text()
            if rc != 0:
                sys.exit(f"{variant} failed ({rc}); its output is in {log}:\n{out[-3000:]}")
            out = "\n".join(line for line in out.splitlines() if line.startswith('{"variant"'))
            r = json.loads(out.strip().splitlines()[-1])
            growth = (r["rss_end_mb"] - r["rss_start_mb"]) / n * 1000
            print(
                f"{variant:12s} trials={r['trials']} wall={r['wall_s']}s rss start={r['rss_start_mb']:.0f} MB"
                f" peak={r['rss_peak_mb']:.0f} MB end={r['rss_end_mb']:.0f} MB"
                f" growth={growth:.1f} MB per 1000 trials",
                flush=True,
            )


if __name__ == "__main__":
    main()
