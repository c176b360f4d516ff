"""Measuring a cost profile (`sweep.plan.estimate`) on the machine this runs on: per architecture and input shape,
forward and training-step seconds per image, the forward share up to each stage and the OOD detector's step
and forward at each stitch point (`calibrate`); the device's float64 algebra rates (`algebra`). Best of a few
repeats after a warm-up, the device synchronised around each timing. `tests/benchmarks/calibrate.py` writes
the profile."""

from __future__ import annotations

import math
import time

import torch

from sweep.plan.prices import shape_key


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
    from sweep.models.base import activation_shapes, build

    dev = torch.device(device)
    best = _timer(dev)
    out = {}
    for arch, channels, size in shapes:
        model = build(arch, channels, 10, (0.5,), (0.5,), image_size=size).to(dev)
        entry = _passes(model, channels, size, dev, best, batch, repeats) if passes else {}
        shapes_at = activation_shapes(arch, channels, size, 10)
        b = min(batch, 128)
        maps = [p for p in model.stitch_points if len(shapes_at[p]) > 1]  # a vector point has no detector
        entry["detector"] = {
            kind: {p: detector(tuple(shapes_at[p]), kind, dev, best, b) for p in maps} for kind in detectors
        }
        out[shape_key(arch, channels, size)] = entry
    return out


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
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    cumulative, share = 0.0, {}
    for name, s in zip(model.stage_names, stage_s):
        cumulative += s
        share[name] = round(cumulative / forward, 4)
    return {
        "forward_s": forward / passes,
        "step_s": best(step, repeats) / batch,
        "share": {k: v for k, v in share.items() if k in model.stitch_points or k in model.extra_points},
    }


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
    """Seconds per operation of float64 algebra on `device` (the rates of `sweep.plan.index_costs`), each the
    geometric mean over the shapes the indices meet:
    - `mac_s`: a wide Gram (n x p times its transpose) and a tall covariance (p x m times m x p);
    - `decomp_s`: a symmetric eigendecomposition with vectors, and a thin SVD with vectors of a tall matrix;
    - `values_s`: eigenvalues only and singular values only of a square matrix;
    - `elem_s`: a float32 matrix to float64, centred, checked finite (4 passes over its elements);
    - `calls_s`: linear CKA of two 64 x 64 matrices, its whole cost (Python, kernel launches, the scalar read)."""
    from sweep.measures.similarity import linear_cka

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
