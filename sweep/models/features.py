"""Reading a network's representations at named points in one forward pass: its stitch points (the staged
forward, stopped after the last point asked for) or any node of its traced graph (torchvision's feature
extraction, the names `get_graph_node_names` gives; for a library network, the nodes of the library's own
traced graph, `sweep.models.library.read_nodes`).

`reduced_features` reads the same points but hands each activation to a reduction (a Gram, a sum) the moment it
exists, so no more than the network's own forward needs is alive at once: the memory of every-layer CKA is one
node's activations plus the reductions, not every node's activations of a batch."""

from __future__ import annotations

from collections.abc import Callable

import torch

from sweep.data.stream import chunks
from sweep.models.base import StagedNet


def features(model: StagedNet, points: tuple[str, ...]) -> Callable[[torch.Tensor], list[torch.Tensor]]:
    """A function x -> [the activation at each of `points`], in the order given. All stitch points (and
    `penultimate`), or all graph nodes (`Architecture.graph_nodes`); the model is used as it is (put it in
    eval mode first). Every activation of a batch is held at once: for many points, reduce them as they run
    (`reduced_features`)."""
    return reduced_features(model, points, _keep)


def _keep(x: torch.Tensor) -> torch.Tensor:
    return x


def flat_features(read: Callable, x: torch.Tensor, device: torch.device, batch: int = 250) -> list[torch.Tensor]:
    """Every point's activations of the images `x` through `read` (a `features` function), in batches of
    `batch` on `device`, flattened to N x features and gathered on the CPU, in the order of the points."""
    with torch.no_grad():
        per_batch = (read(xb.to(device)) for xb in chunks(x, batch))
        return [torch.cat(t).flatten(1).cpu() for t in zip(*per_batch)]


class _Reduce(torch.nn.Module):
    """A graph node that applies `fn` to one activation (a module, so torch.fx can call any function)."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def reduced_features(
    model: StagedNet, points: tuple[str, ...], reduce: Callable[[torch.Tensor], torch.Tensor]
) -> Callable[[torch.Tensor], list[torch.Tensor]]:
    """A function x -> [reduce(the activation at each of `points`)], in the order given, where each reduction
    runs as soon as its point's activation is computed and before any later operation (an in-place ReLU after
    a BatchNorm cannot change what the BatchNorm's reduction saw). The activations themselves are not kept:
    a staged forward holds only the current stage's output; a traced graph frees each value after its last
    use (torch.fx), the reduction being one such use."""
    if all(p in model.stitch_points or p in model.extra_points for p in points):
        wanted = set(points)
        last = max(model.stage_names.index(p) for p in points)

        def staged(x: torch.Tensor) -> list[torch.Tensor]:
            out = {}
            for name in model.stage_names[: last + 1]:
                x = model.stage(name)(x)
                if name in wanted:
                    out[name] = reduce(x)
            return [out[p] for p in points]

        return staged
    if getattr(model, "library", None):  # a library network: the nodes of the library's own traced graph
        from sweep.models.library import read_nodes

        return read_nodes(model, points, reduce)
    from torchvision.models.feature_extraction import create_feature_extractor

    extractor = create_feature_extractor(model, return_nodes=list(points))
    extractor.train(model.training)
    extractor.add_submodule("_stitchsweep_reduce", _Reduce(reduce))
    graph = extractor.graph
    output = next(n for n in graph.nodes if n.op == "output")
    reduced = {}
    for name, node in output.args[0].items():
        with graph.inserting_after(node):
            reduced[name] = graph.call_module("_stitchsweep_reduce", (node,))
    output.args = (reduced,)
    graph.lint()
    extractor.recompile()

    def traced(x: torch.Tensor) -> list[torch.Tensor]:
        found = extractor(x)
        return [found[p] for p in points]

    return traced
