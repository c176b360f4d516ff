"""What a stitching trial measures besides accuracy: the similarity indices between f<=i and g<=j, and the
energy-OOD AUROC of the stitched representation. Both read the frozen halves' activations through
`sweep.worker.activations.Frozen`, so they come from the worker's cache when it is on."""

from __future__ import annotations

from pathlib import Path

import torch

from sweep.config.trial import TrialSpec
from sweep.data.core import Splits
from sweep.kinds.base import RunContext
from sweep.registry import INDICES
from sweep.stitching.stitcher import Stitcher
from sweep.store.layout import ENERGIES_DIR
from sweep.store.results import write_rows
from sweep.store.schema import schema
from sweep.train.evaluate import activations
from sweep.worker.activations import Frozen


def outlier_images(
    names: tuple[str, ...], n: int, like: torch.Tensor, data_root: str | None, download: bool, seed: int = 0
) -> torch.Tensor:
    """The auxiliary outlier set: the first `n` training images of each named dataset and/or `n` images of
    uniform noise, shaped like `like` (one image)."""
    from sweep.worker.splits import worker_train_images

    parts = []
    for name in names:
        if name == "noise":
            gen = torch.Generator().manual_seed(seed)
            parts.append(torch.rand((n, *like.shape), generator=gen))
        elif name == "random300k":
            parts.append(random_300k(n, data_root))
        else:
            parts.append(worker_train_images(name, n, root=data_root, download=download))
    return torch.cat(parts)


RANDOM_300K = "300K_random_images.npy"  # Hendrycks et al. 2019's outlier set: N x 32 x 32 x 3 uint8


def random_300k(n: int, data_root: str | None) -> torch.Tensor:
    """The first `n` of the 300K Random Images (Hendrycks et al. 2019), read from `<data root>/300K_random_images.npy`
    (memory-mapped), as N x 3 x 32 x 32 pixels in [0, 1]. Never downloaded."""
    import numpy as np

    from sweep.data.core import data_root as default_root

    path = Path(data_root) if data_root else default_root()
    path = path / RANDOM_300K
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: the 300K Random Images are not downloaded; put the outlier-exposure .npy there"
        )
    images = np.load(path, mmap_mode="r")[:n]
    return torch.from_numpy(np.array(images)).permute(0, 3, 1, 2).float().div(255)  # a copy: the map is read-only


def ood_auroc(spec: TrialSpec, ctx: RunContext, front: Frozen, end_front: Frozen, stitcher, splits: Splits) -> float:
    """AUROC of the end layer's energy detector between target activations g<=j(x) and stitched ones
    T(f<=i(x)) on test images (Balogh & Jelasity 2025 Section 4); the detector is trained once per end
    donor, layer and OOD setting and cached in the zoo. The per-sample energies (Fig. 1c: also of the first
    `ood_samples` images of the outlier set, which the detector's outlier exposure saw) are written as the
    trial's `energies` part, before the trial's own."""
    from sweep.measures.ood import auroc, detector_path, energy, load_or_train, train_detector

    sweep, device, data_root, download = ctx.sweep_dir, ctx.device, ctx.data_root, ctx.download
    for m in (front.module, end_front.module, stitcher):
        m.eval()
    setting = {
        "outliers": list(spec.ood_outliers),
        "train_size": spec.ood_train_size,
        "epochs": spec.ood_epochs,
        "oe_epochs": spec.ood_oe_epochs,
        "split": splits.split_id,
        "v": 1,
        **({"detector": spec.ood_detector} if spec.ood_detector else {}),  # the small one keeps its cache tag
    }

    def train():
        x_in = splits.train_x[: spec.ood_train_size]
        x_out = outlier_images(spec.ood_outliers, spec.ood_train_size, x_in[0], data_root, download)
        return train_detector(
            end_front.on("train", spec.ood_train_size).float().cpu(),
            splits.train_y[: spec.ood_train_size].cpu(),
            activations(end_front.module, x_out, device).cpu(),
            splits.num_classes,
            epochs=spec.ood_epochs,
            oe_epochs=spec.ood_oe_epochs,
            device=device,
            kind=spec.ood_detector or "small",
        )

    det = load_or_train(detector_path(sweep.zoo(spec.end_key), spec.end_point, setting), train).to(device).eval()
    n = spec.ood_samples
    sent = front.on("test", n)
    x_out = outlier_images(spec.ood_outliers, n, splits.test_x[0], data_root, download)
    with torch.no_grad():
        e_target = energy(activations(det, end_front.on("test", n), device)).cpu()
        e_stitched = energy(activations(lambda a: det(stitcher(a)), sent, device)).cpu()
        e_outlier = energy(activations(lambda x: det(end_front.module(x)), x_out, device)).cpu()
    kinds = {"target": e_target, "stitched": e_stitched, "outlier": e_outlier}
    rows = [
        dict(trial_id=spec.trial_id, sweep=sweep.name, kind=k, energy=float(e)) for k, v in kinds.items() for e in v
    ]
    write_rows(sweep.part(ENERGIES_DIR, spec.trial_id), rows, schema(ENERGIES_DIR))
    return auroc(e_target, e_stitched)


def similarities(spec: TrialSpec, front: Frozen, end_front: Frozen, stitcher: Stitcher) -> dict:
    """The requested indices between f<=i(x) and g<=j(x) on the first `similarity_samples` test images,
    each in its layout (the registered one, or the spec's for PWCCA and OPD). The DM distance fits its map
    on the first K training images (Balogh & Jelasity 2025, 2.3), computed only when it is requested.

    They are computed (in float64) where the activations are, on the trial's device: on a GPU the host's
    float64 algebra was most of a DM trial (docs/performance.md). A pair too large for the card's free memory
    is measured on the host instead (the same values, up to rounding)."""
    try:
        return _similarities(spec, front, end_front, stitcher, lambda t: t.float())
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return _similarities(spec, front, end_front, stitcher, lambda t: t.float().cpu())


def _similarities(spec: TrialSpec, front: Frozen, end_front: Frozen, stitcher: Stitcher, place) -> dict:
    from sweep.measures.indices import Pair

    n, k = spec.similarity_samples, spec.dm_samples or 0
    pair = Pair(
        place(front.on("test", n)),
        place(end_front.on("test", n)),
        resize=stitcher.resize,
        fit=lambda: (place(front.on("train", k)), place(end_front.on("train", k))),
        layouts={k: v for k, v in (("pwcca", spec.pwcca_layout), ("opd", spec.opd_layout)) if v},
        options={"mknn_k": spec.mknn_k},
    )
    out = {}
    for name in spec.indices:
        index = INDICES[name]
        if not index.after_fit:  # those are measured on the stitched network, after the fit
            values = index.values(pair)
            out.update(values)
            if spec.permutations and index.kind in ("similarity", "distance"):
                out.update(index.null(pair, values[index.entry.column], spec.permutations, spec.seed))
    return out
