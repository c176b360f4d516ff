"""Measuring a cost profile (`sweep.planning.estimate`) on the machine this runs on: per architecture and input shape,
forward and training-step seconds per image, the forward share up to each stage and the OOD detector's step
and forward at each stitch point (`calibrate`); the device's float64 algebra rates (`algebra`). Best of a few
repeats after a warm-up, the device synchronised around each timing. `tests/benchmarks/calibrate.py` writes
the profile. `measure_here`: the entries a profile lacks for a plugin's architectures, measured the same way
when a plan is priced, in the profile's seconds."""

from __future__ import annotations

import math
import time

import torch

from sweep.costs.pricer import shape_key

# Measuring a plan's unknown architecture: `calibrate`'s repeats; then rounds of its forward and step and the
# reference's, in turn (at least, at most), and the seconds after which no further round starts
REPEATS, PAIRS, BUDGET_S = 2, (5, 40), 2.0
_MEASURED: dict[tuple, tuple] = {}  # what this process measured, each shape once: its entry, note and seconds


def _timer(dev: torch.device):
    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def best(fn, repeats: int = 3) -> float:
        fn()  # warm-up
        out = math.inf
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            out = min(out, time.perf_counter() - t0)
        return out

    return best


def calibrate(
    shapes: list[tuple[str, int, int]],
    device: str = "cpu",
    batch: int = 128,
    repeats: int = 3,
    detectors: tuple[str, ...] = ("small",),
    passes: bool = True,
) -> dict:
    """Measure forward and training-step seconds per image and the forward share up to each stage for
    every (architecture, channels, image size), on `device` (`passes`), and the OOD `detectors`' seconds per
    image at each stitch point. Returns the profile's "archs" mapping."""
    dev = torch.device(device)
    best = _timer(dev)
    out = {}
    for arch, channels, size in shapes:
        model = _built(arch, channels, size, dev)
        entry = _passes(model, channels, size, dev, best, batch, repeats) if passes else {}
        entry["detector"] = _detectors(model, (arch, channels, size), detectors, dev, best, min(batch, 128))
        out[shape_key(arch, channels, size)] = entry
    return out


def _built(arch: str, channels: int, size: int, dev: torch.device):
    from sweep.models.base import build

    return build(arch, channels, 10, (0.5,), (0.5,), image_size=size).to(dev)


def _detectors(model, shape: tuple[str, int, int], kinds, dev: torch.device, best, batch: int) -> dict:
    """The OOD detectors' timings (`detector`) of each of `kinds` at each stitch point of `model` (a vector point
    has none)."""
    from sweep.models.base import activation_shapes

    shapes_at = activation_shapes(*shape, 10)
    maps = [p for p in model.stitch_points if len(shapes_at[p]) > 1]
    return {kind: {p: detector(tuple(shapes_at[p]), kind, dev, best, batch) for p in maps} for kind in kinds}


def _passes(model, channels: int, size: int, dev: torch.device, best, batch: int, repeats: int) -> dict:
    """A model's forward and training-step seconds per image, and the forward's share up to each stage. The
    forward is timed at the engine's inference passes (`inference_batch`: at most 50 images on the CPU), the
    step at the training batch."""
    from sweep.train.evaluate import inference_batch

    x = torch.rand(batch, channels, size, size, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    passes = inference_batch(batch, dev)
    model.eval()
    stage_s = []
    with torch.no_grad():
        h = x[:passes]
        for name in model.stage_names:
            stage = model.stage(name)
            stage_s.append(best(lambda stage=stage, h=h: stage(h), repeats))
            h = stage(h)
    forward = sum(stage_s)
    step = _step_of(model, x, y)
    cumulative, share = 0.0, {}
    for name, s in zip(model.stage_names, stage_s):
        cumulative += s
        share[name] = round(cumulative / forward, 4)
    return {
        "forward_s": forward / passes,
        "step_s": best(step, repeats) / batch,
        "share": {k: v for k, v in share.items() if k in model.stitch_points or k in model.extra_points},
    }


def _step_of(model, x: torch.Tensor, y: torch.Tensor):
    """A training step of `model` on `x`, `y` (a forward, a backward, an SGD update), as a function."""
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        model.train()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def detector(shape: tuple[int, ...], kind: str, dev: torch.device, best, batch: int = 128) -> dict:
    """Seconds per activation of the OOD detector (`sweep.measures.ood.Detector`) on activations of `shape`:
    a training step as `train_detector` takes it (a batch of 128 gathered from activations kept on the host,
    sent to the device; Adam), and a forward pass in evaluation."""
    from sweep.measures.ood import Detector
    from sweep.train.evaluate import inference_batch

    det = Detector(shape, 10, kind=kind).to(dev)
    held = torch.randn(2 * batch, *shape)  # the training activations, on the host as the trial keeps them
    labels = torch.randint(0, 10, (2 * batch,))
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(det.parameters(), lr=1e-3)

    def step():
        idx = torch.randperm(len(held), generator=gen)[:batch]
        a, y = held[idx].to(dev), labels[idx].to(dev)
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(det(a), y).backward()
        opt.step()

    det.train()
    step_s = best(step, 2)
    det.eval()
    a = held[: inference_batch(batch, dev)].to(dev)  # the energies are computed in inference passes
    with torch.no_grad():
        forward_s = best(lambda: det(a), 2)
    return {"step_s": step_s / batch, "forward_s": forward_s / len(a)}


def algebra(device: str = "cpu", repeats: int = 5) -> dict:
    """Seconds per operation of float64 algebra on `device` (the rates of `sweep.costs.work`), each the
    geometric mean over the shapes the indices meet:
    - `mac_s`: a wide Gram (n x p times its transpose) and a tall covariance (p x m times m x p);
    - `decomp_s`: a symmetric eigendecomposition with vectors, and a thin SVD with vectors of a tall matrix;
    - `values_s`: eigenvalues only and singular values only of a square matrix;
    - `elem_s`: a float32 matrix to float64, centred, checked finite (4 passes over its elements);
    - `calls_s`: linear CKA of two 64 x 64 matrices, its whole cost (Python, kernel launches, the scalar read)."""
    from sweep.measures.indices.cka import linear_cka

    dev = torch.device(device)
    best = _timer(dev)
    gen = torch.Generator(device=dev).manual_seed(0)

    def rand(*shape, dtype=torch.float64):
        return torch.rand(*shape, generator=gen, dtype=dtype, device=dev)

    def mean(values: list[float]) -> float:
        return math.exp(sum(math.log(v) for v in values) / len(values))

    wide, tall = rand(1000, 8192), rand(65536, 128)
    mac = [best(lambda: wide @ wide.T, repeats) / (1000 * 1000 * 8192), best(lambda: tall.T @ tall) / (65536 * 128**2)]
    sym = rand(512, 512)
    sym = sym + sym.T
    skinny = rand(10000, 64)
    decomp = [best(lambda: torch.linalg.eigh(sym), repeats) / 512**3]
    decomp.append(best(lambda: torch.linalg.svd(skinny, full_matrices=False), repeats) / (10000 * 64**2))
    values = [best(lambda: torch.linalg.eigvalsh(sym), repeats) / 512**3]
    values.append(best(lambda: torch.linalg.svdvals(sym), repeats) / 512**3)
    x = rand(4000, 4096, dtype=torch.float32)

    def elementwise():
        y = x.to(torch.float64)
        y = y - y.mean(dim=0, keepdim=True)
        return bool(torch.isfinite(y).all())

    small = rand(64, 64), rand(64, 64)
    return {
        "mac_s": mean(mac),
        "decomp_s": mean(decomp),
        "values_s": mean(values),
        "elem_s": best(elementwise, repeats) / (4 * x.numel()),
        "calls_s": best(lambda: linear_cka(*small), repeats),
    }


def batch_for(size: int, gpu: bool) -> int:
    """The batch an input of `size` px is timed at, as `tests/benchmarks/calibrate.py` times a profile's: on a GPU
    the batches it runs trials at (small ones leave it idle between kernels), on a CPU ones that keep it short."""
    if size <= 64:
        return 512 if gpu else 128
    return (128 if gpu else 16) if size <= 160 else (64 if gpu else 4)


def measure_here(shapes: dict, profile: dict, detectors: dict) -> tuple[dict, dict, dict, float]:
    """Profile entries for `shapes` (shape key -> (arch, channels, image size): a plugin's architectures the
    profile lacks), measured on this machine as `calibrate` measures a profile's (passes, shares and the OOD
    detector kinds `detectors` names for the key), on the profile's device (the CPU where it has none), in the
    profile's seconds: its forward and step as multiples of a shipped architecture's that the profile holds
    (`_reference`), the two timed in turn here (`_measure`), on one CPU thread (as a worker of one CPU runs
    them; two threads on a busy 2-core machine wait on each other, and their timings scatter 10x). Each shape
    is measured once per process. Returns the entries, how each was measured (the estimate's line), the keys
    whose measuring raised, with the error, and the seconds the measuring took (the first time)."""
    dev = "cuda" if profile.get("device") == "cuda" and torch.cuda.is_available() else "cpu"
    threads = torch.get_num_threads()
    entries, notes, failed, took = {}, {}, {}, 0.0
    try:
        for key, (arch, channels, size) in shapes.items():
            kinds = tuple(sorted(detectors.get(key, ())))
            ref = _reference(profile, channels, size)
            if dev == "cpu":  # a ratio to a reference on one thread (as a worker runs); else the profile's threads
                torch.set_num_threads(1 if ref is not None else max(1, int(profile.get("threads", threads))))
            memo = (arch, _builder(arch), channels, size, kinds, dev, torch.get_num_threads(), str(ref))
            if memo not in _MEASURED:
                t0 = time.perf_counter()
                try:
                    entry, how = _measure(arch, channels, size, kinds, ref, dev)
                except Exception as exc:  # the user's network, whatever it raises: the estimate goes on without it
                    entry, how = None, f"{type(exc).__name__}: {exc}"
                _MEASURED[memo] = (entry, how, time.perf_counter() - t0)
            entry, how, seconds = _MEASURED[memo]
            (failed if entry is None else notes)[key] = how
            if entry is not None:
                entries[key] = entry
            took += seconds
    finally:
        torch.set_num_threads(threads)
    return entries, notes, failed, took


def _builder(arch: str):
    from sweep.registry import ARCHITECTURES

    return ARCHITECTURES[arch].build  # a plugin loaded again builds anew: measured again


def _measure(arch: str, channels: int, size: int, kinds: tuple, ref, dev: str) -> tuple[dict, str]:
    """One shape's entry in the profile's seconds, and what was timed: its passes, shares and OOD detectors
    as `calibrate` times them (this machine's seconds); then its forward and step and the reference
    architecture's (`_reference`) timed in turn (`_in_turn`), whose ratios, pair by pair, hold on a busy machine
    where either alone does not: its forward and step are the reference's in the profile times their medians."""
    device, gpu = torch.device(dev), dev != "cpu"
    best, batch = _timer(device), batch_for(size, gpu)
    model = _built(arch, channels, size, device)
    entry = _passes(model, channels, size, device, best, batch, REPEATS)
    entry["detector"] = _detectors(model, (arch, channels, size), kinds, device, best, min(batch, 128))
    nets = [(model, channels, size, batch)]
    if ref is not None:
        nets.append((_built(*ref[1], device), *ref[1][1:], batch_for(ref[1][2], gpu)))
    (fwd, step), *theirs_here = _in_turn(nets, device)
    n = len(fwd)
    if ref is None:
        ratio = 1.0
        entry["forward_s"], entry["step_s"] = min(fwd), min(step)
        how = f"{min(step) * 1e3:.3g} ms per image (this machine's: the profile has no shipped network to scale by)"
    else:
        (rfwd, rstep), theirs = theirs_here[0], ref[2]
        per_fwd, per_step = _median([a / b for a, b in zip(fwd, rfwd)]), _median([a / b for a, b in zip(step, rstep)])
        entry["forward_s"], entry["step_s"] = theirs["forward_s"] * per_fwd, theirs["step_s"] * per_step
        ratio = entry["step_s"] / _median(step)  # the profile's seconds per second here, for the detectors
        how = (
            f"{entry['step_s'] * 1e3:.3g} ms per image in the profile's seconds ({per_step:.2f}x the step and"
            f" {per_fwd:.2f}x the forward of {ref[0]}, timed in turn here)"
        )
    for t in (t for d in entry["detector"].values() for t in d.values()):
        t["step_s"], t["forward_s"] = t["step_s"] * ratio, t["forward_s"] * ratio
    return entry, f"{n} forward+backward passes of {batch} images, {how}"


def _in_turn(nets: list, dev: torch.device) -> list[tuple[list[float], list[float]]]:
    """Each of `nets` ((model, channels, size, batch)) timed in turn, a forward (at the inference batch, no
    gradients) and a training step each, round after round (`PAIRS`: at least the first, while under
    `BUDGET_S`): per net, its forward's and its step's seconds per image, round by round."""
    from sweep.train.evaluate import inference_batch

    passes = []
    for model, channels, size, batch in nets:
        x, y = torch.rand(batch, channels, size, size, device=dev), torch.randint(0, 10, (batch,), device=dev)
        inputs = x[: inference_batch(batch, dev)]

        def forward(model=model, inputs=inputs):
            model.eval()
            with torch.no_grad():
                model(inputs)

        passes.append(((forward, len(inputs)), (_step_of(model, x, y), batch)))
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    out = [([], []) for _ in nets]
    for timed in passes:  # warm-up
        for fn, _ in timed:
            fn()
    t0 = time.perf_counter()
    while len(out[0][0]) < PAIRS[1] and (len(out[0][0]) < PAIRS[0] or time.perf_counter() - t0 < BUDGET_S):
        for timed, kept in zip(passes, out):
            for (fn, images), seconds in zip(timed, kept):
                sync()
                start = time.perf_counter()
                fn()
                sync()
                seconds.append((time.perf_counter() - start) / images)
    return out


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _reference(profile: dict, channels: int, size: int) -> tuple | None:
    """The shipped architecture of the profile to scale by: its cheapest at the same input, else its cheapest
    ((key, (arch, channels, size), entry); None when the profile has none)."""
    from sweep.registry import ARCHITECTURES

    shipped = {n for n in ARCHITECTURES.names() if getattr(ARCHITECTURES[n], "builtin", False)}
    found = []
    for key, entry in profile.get("archs", {}).items():
        arch, _, shape = key.rpartition("@")
        c, _, s = shape.partition("x")
        if arch in shipped and c.isdigit() and s.isdigit() and entry.get("step_s") and entry.get("forward_s"):
            found.append(((int(c), int(s)) != (channels, size), entry["forward_s"], key, (arch, int(c), int(s))))
    if not found:
        return None
    _, _, key, shape = min(found)
    return key, shape, {k: profile["archs"][key][k] for k in ("forward_s", "step_s")}
