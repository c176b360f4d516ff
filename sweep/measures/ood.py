"""Energy-based OOD detection of stitched representations (Balogh & Jelasity 2025 Section 4; Liu et al. 2020).

For a target layer g<=j, a detector network is trained on the target activations of training images (with
their labels: in-distribution, ID) and fine-tuned with outlier exposure on the activations of an auxiliary
outlier set, so that its energy E(a) = -logsumexp(logits) is low on ID activations and high on outliers:
    loss = CE(ID) + lambda * (mean(relu(E_in - m_in)^2) + mean(relu(m_out - E_out)^2)),  m_in = -25, m_out = -7.
The AUROC between the energies of the target activations g<=j(x) and of the stitched ones T(f<=i(x)) on
test images then says how out-of-distribution the stitcher's output is for the receiver (0.5: ID).

Detectors (`kind`): `small`, the default, a small conv net (two 3x3 conv layers, global pooling, linear; token
activations: LayerNorm, an MLP per token, mean over tokens) that a CPU trains in seconds; `paper`, Section 4.1's:
a ResNet-18 for conv activations (torchvision's, its stem a 3x3 convolution from the activation's channels, no
max-pool) and a ViT-Ti without its embedding for tokens (12 encoder blocks of width 192, 3 heads; a linear map
to 192 first when the tokens are of another width; the class token after the final LayerNorm). The outlier set
is configurable: the 300K Random Images (`random300k`, from a local file), another registered dataset of the
same input shape, and/or uniform noise images. Detectors are cached per end donor, layer and OOD setting under
ROOT/zoo/<donor_key>/ood/.
"""

from __future__ import annotations

import hashlib
import json

import torch
from torch import nn

from sweep.store.results import Loc, load_torch, save_torch

M_IN, M_OUT, OE_WEIGHT = -25.0, -7.0, 0.1  # Liu et al.'s margins and weight for CIFAR-10


class Detector(nn.Module):
    def __init__(self, shape: tuple[int, ...], num_classes: int, width: int = 64, kind: str = "small") -> None:
        super().__init__()
        self.shape, self.num_classes, self.kind = tuple(shape), num_classes, kind
        if kind == "paper":
            self.net = _resnet18(shape[0], num_classes) if len(shape) == 3 else _vit_ti(shape[1], num_classes)
        elif len(shape) == 3:
            c = shape[0]
            self.net = nn.Sequential(
                nn.Conv2d(c, width, 3, padding=1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.Conv2d(width, width, 3, padding=1, stride=2 if min(shape[1:]) > 2 else 1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(width, num_classes),
            )
        elif len(shape) == 2:
            self.net = _TokenHead(shape[1], width, num_classes)
        else:
            raise ValueError(f"detector: expected (C, H, W) or (tokens, dim) activations, found {shape}")

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.net(a)


def _resnet18(channels: int, num_classes: int) -> nn.Module:
    """torchvision's ResNet-18 reading activations: a 3x3 stride-1 stem from `channels`, no max-pool."""
    from torchvision.models import resnet18

    net = resnet18(num_classes=num_classes)
    net.conv1 = nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
    net.maxpool = nn.Identity()
    return net


class _vit_ti(nn.Module):  # noqa: N801  (named like the builders it stands beside)
    """ViT-Ti without its embedding: tokens (mapped to width 192 if need be), 12 encoder blocks, the class token."""

    def __init__(self, dim: int, num_classes: int, width: int = 192, depth: int = 12, heads: int = 3) -> None:
        super().__init__()
        from sweep.models.vit import EncoderBlock

        self.proj = nn.Identity() if dim == width else nn.Linear(dim, width)
        self.blocks = nn.Sequential(*[EncoderBlock(width, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, num_classes)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.proj(a)))[:, 0])


class _TokenHead(nn.Module):
    def __init__(self, dim: int, width: int, num_classes: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, width), nn.GELU(), nn.Linear(width, width), nn.GELU())
        self.out = nn.Linear(width, num_classes)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.out(self.mlp(self.norm(a)).mean(dim=1))


def energy(logits: torch.Tensor) -> torch.Tensor:
    return -torch.logsumexp(logits, dim=1)


def train_detector(
    acts_in: torch.Tensor,
    y_in: torch.Tensor,
    acts_out: torch.Tensor,
    num_classes: int,
    *,
    epochs: int,
    oe_epochs: int,
    lr: float = 1e-3,
    batch_size: int = 128,
    seed: int = 0,
    device: torch.device | str = "cpu",
    kind: str = "small",
) -> Detector:
    """Pre-train on ID activations with cross-entropy, then fine-tune with the energy outlier-exposure loss."""
    device = torch.device(device)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    det = Detector(tuple(acts_in.shape[1:]), num_classes, kind=kind).to(device)
    opt = torch.optim.Adam(det.parameters(), lr=lr)
    ce = nn.CrossEntropyLoss()
    det.train()
    for epoch in range(epochs + oe_epochs):
        order = torch.randperm(len(acts_in), generator=gen)
        out_order = torch.randperm(len(acts_out), generator=gen)
        for k, i in enumerate(range(0, len(order), batch_size)):
            idx = order[i : i + batch_size]
            a, y = acts_in[idx].to(device), y_in[idx].to(device)
            if epoch < epochs:
                loss = ce(det(a), y)
            else:
                j = out_order[(k * batch_size) % len(out_order) :][:batch_size]
                logits = det(torch.cat([a, acts_out[j].to(device)]))
                e_in, e_out = energy(logits[: len(a)]), energy(logits[len(a) :])
                loss = ce(logits[: len(a)], y) + OE_WEIGHT * (
                    torch.relu(e_in - M_IN).pow(2).mean() + torch.relu(M_OUT - e_out).pow(2).mean()
                )
            if not torch.isfinite(loss):
                raise FloatingPointError(f"OOD detector training: loss became {loss.item()}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return det.eval()


def auroc(negatives: torch.Tensor, positives: torch.Tensor) -> float:
    """P(score of a positive > score of a negative) + 0.5 P(tie): the area under the ROC curve."""
    if len(negatives) == 0 or len(positives) == 0:
        raise ValueError("AUROC needs scores on both sides")
    scores = torch.cat([negatives, positives]).double()
    ranks = _average_ranks(scores)
    n_neg, n_pos = len(negatives), len(positives)
    u = ranks[n_neg:].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_neg * n_pos))


def _average_ranks(x: torch.Tensor) -> torch.Tensor:
    order = torch.argsort(x)
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(1, len(x) + 1, dtype=x.dtype)
    uniq, inverse = torch.unique(x, return_inverse=True)
    sums = torch.zeros(len(uniq), dtype=x.dtype).index_add_(0, inverse, ranks)
    counts = torch.zeros(len(uniq), dtype=x.dtype).index_add_(0, inverse, torch.ones_like(x))
    return (sums / counts)[inverse]


def detector_path(zoo_dir: Loc, end_point: str, setting: dict) -> Loc:
    tag = hashlib.sha256(json.dumps(setting, sort_keys=True).encode()).hexdigest()[:12]
    return zoo_dir / "ood" / f"{end_point}-{tag}.pt"


def load_or_train(path: Loc, train) -> Detector:
    """The cached detector at `path`, or `train()`'s, saved there atomically (concurrent trials that race
    both train; the last rename wins, and both detectors are valid)."""
    if path.exists():
        blob = load_torch(path, map_location="cpu")
        det = Detector(tuple(blob["shape"]), blob["num_classes"], kind=blob.get("kind", "small"))
        det.load_state_dict(blob["state_dict"])
        return det.eval()
    det = train()
    blob = {
        "shape": list(det.shape),
        "num_classes": det.num_classes,
        "kind": det.kind,
        "state_dict": {k: v.cpu() for k, v in det.state_dict().items()},
    }
    save_torch(path, blob)
    return det
