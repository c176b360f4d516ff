"""Linear probes (Alain & Bengio 2017): how linearly decodable the labels are from a representation.

The probing accuracy of Balogh & Jelasity 2025 Section 5 (after Ding et al.): a linear classifier (one affine layer,
softmax cross-entropy) trained on frozen features, standardised with the training features' mean and
standard deviation, scored on held-out features. Pure PyTorch, deterministic for a seed.
"""

from __future__ import annotations

import torch
from torch import nn

from sweep.train.evaluate import accuracy


def linear_probe_accuracy(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    num_classes: int,
    *,
    epochs: int = 10,
    lr: float = 1e-3,
    batch_size: int = 256,
    weight_decay: float = 0.0,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> float:
    """Test accuracy of a linear classifier trained with Adam on (train_x, train_y); inputs are (N, D)."""
    if train_x.dim() != 2 or test_x.dim() != 2 or train_x.shape[1] != test_x.shape[1]:
        raise ValueError(
            f"probe: expected 2-D features of one width, found {tuple(train_x.shape)} and {tuple(test_x.shape)}"
        )
    if len(train_y) == 0 or len(test_y) == 0:
        raise ValueError("probe: empty training or test set")
    if not (torch.isfinite(train_x).all() and torch.isfinite(test_x).all()):
        raise ValueError("probe: features hold NaN or infinite values")
    device = torch.device(device)
    mean = train_x.mean(0, keepdim=True)
    std = train_x.std(0, keepdim=True).clamp_min(1e-6)
    xtr = ((train_x - mean) / std).to(device)
    xte = ((test_x - mean) / std).to(device)
    ytr, yte = train_y.to(device), test_y.to(device)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    probe = nn.Linear(xtr.shape[1], num_classes).to(device)
    opt = torch.optim.Adam(probe.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        order = torch.randperm(len(ytr), generator=gen).to(device)
        for i in range(0, len(ytr), batch_size):
            idx = order[i : i + batch_size]
            loss = loss_fn(probe(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    with torch.no_grad():
        return accuracy(probe(xte).argmax(1), yte)
