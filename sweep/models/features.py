"""Reading a network's representations at named points in one forward pass: its stitch points (the staged
forward, stopped after the last point asked for) or any node of its traced graph (torchvision's feature
extraction, the names `get_graph_node_names` gives)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from sweep.models.base import StagedNet


def features(model: StagedNet, points: tuple[str, ...]) -> Callable[[torch.Tensor], list[torch.Tensor]]:
    """A function x -> [the activation at each of `points`], in the order given. All stitch points (and
    `penultimate`), or all
    graph nodes (`Architecture.graph_nodes`); the model is used as it is (put it in eval mode first)."""
    if all(p in model.stitch_points or p in model.extra_points for p in points):
        wanted = set(points)
        last = max(model.stage_names.index(p) for p in points)

        def staged(x: torch.Tensor) -> list[torch.Tensor]:
            out = {}
            for name in model.stage_names[: last + 1]:
                x = model.stage(name)(x)
                if name in wanted:
                    out[name] = x
            return [out[p] for p in points]

        return staged
    from torchvision.models.feature_extraction import create_feature_extractor

    extractor = create_feature_extractor(model, return_nodes=list(points))
    extractor.train(model.training)

    def traced(x: torch.Tensor) -> list[torch.Tensor]:
        found = extractor(x)
        return [found[p] for p in points]

    return traced


def flat_features(read: Callable, x: torch.Tensor, device: torch.device, batch: int = 250) -> list[torch.Tensor]:
    """Every point's activations of the images `x` through `read` (a `features` function), in batches of
    `batch` on `device`, flattened to N x features and gathered on the CPU, in the order of the points."""
    with torch.no_grad():
        per_batch = (read(x[i : i + batch].to(device)) for i in range(0, len(x), batch))
        return [torch.cat(t).flatten(1).cpu() for t in zip(*per_batch)]
