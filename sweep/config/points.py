"""The points of a network a section names (`points:`): its stitch points, every node of its traced graph, or a
list of either, validated against the architecture."""

from __future__ import annotations

from typing import Any

from sweep.config.errors import SpecError
from sweep.config.fields import check_value
from sweep.registry import ARCHITECTURES, did_you_mean


def points(raw: Any, arch: str, path: str) -> tuple[str, ...]:
    """The points of `arch` that `raw` names: "stitch" (its stitch points), "modules" (every node of its traced
    graph but the input), or a list of either kind (not mixed)."""
    entry = ARCHITECTURES[arch]
    if raw == "stitch":
        return tuple(entry.stitch_points())
    stitch = entry.points()  # the stitch points and `penultimate`
    if isinstance(raw, list) and raw and raw[0] in stitch:
        nodes = stitch  # no tracing (a ViT cannot be traced)
    else:
        nodes = _graph_nodes(entry, path)
    if raw == "modules":
        return tuple(n for n in nodes if n != "x")
    if not isinstance(raw, list) or not raw:
        raise SpecError(path, "'stitch', 'modules' or a non-empty list of point names", raw)
    valid = stitch if raw[0] in stitch else nodes
    kind = "stitch point" if valid is stitch else "graph node (or all stitch points)"
    for k, name in enumerate(raw):
        check_value(name, f"{path}[{k}]", "string")
        if name not in valid:
            hint = did_you_mean(name, valid) or f"{len(valid)} names, e.g. {valid[:4]}"
            raise SpecError(f"{path}[{k}]", f"a {kind} of {arch}", name, hint)
    return tuple(raw)


def _graph_nodes(entry, path: str) -> list[str]:
    try:
        return entry.graph_nodes()
    except Exception as exc:  # a network that torch.fx cannot trace (the ViTs)
        expected = f"stitch points of {entry.name} (its graph cannot be traced)"
        raise SpecError(path, expected, "modules", str(exc)) from None
