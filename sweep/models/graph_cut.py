"""A network's traced graph cut into consecutive pieces (library networks by name).

A network is traced once with torch.fx (torchvision's `NodePathTracer`, with the tracer arguments its library
uses: torchvision's ops as leaves, or timm's leaf modules and functions), in evaluation mode. Every node is
named as torchvision's `get_graph_node_names` names it (`layer1.0.conv1`, `layer1.0.add`). A node is a cut
point when the value it computes is one tensor and nothing computed before it (the input included) is read
after it: cutting there, exactly that tensor crosses. `pieces` turns the graph into one `GraphModule` per
stretch between consecutive cut points; run one after the other they compute the network's graph, op for op.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

NODE_NAME = "stitchsweep_node"  # a node's name in the traced graph, in its `meta`


@dataclass
class Traced:
    """A traced network: its graph module, its nodes in graph order and each node's name."""

    module: fx.GraphModule
    nodes: list[fx.Node]
    names: dict[fx.Node, str]

    def named(self, name: str) -> fx.Node:
        return next(n for n in self.nodes if self.names[n] == name)


def trace(model: nn.Module, tracer_kwargs: dict | None = None) -> Traced:
    """Trace `model` in evaluation mode; raises what the tracer raises."""
    from torchvision.models.feature_extraction import NodePathTracer, _set_default_tracer_kwargs

    tracer = NodePathTracer(**_set_default_tracer_kwargs(dict(tracer_kwargs or {})))
    graph = tracer.trace(model.eval())
    module = fx.GraphModule(tracer.root, graph, type(model).__name__)
    names = {n: tracer.node_to_qualname.get(n, n.name) for n in graph.nodes}
    named = {n: names[old] for n, old in zip(module.graph.nodes, graph.nodes)}
    for node, name in named.items():  # carried into the pieces (`node_copy` copies meta): `NodeReader`
        node.meta[NODE_NAME] = name
    return Traced(module, list(module.graph.nodes), named)


class NodeReader(fx.Interpreter):
    """Runs a piece and hands the value of every node named in `wanted` (by its traced-graph name) to `reduce`
    the moment it is computed, into `found`."""

    def __init__(self, piece: fx.GraphModule, wanted: set[str], found: dict, reduce) -> None:
        super().__init__(piece)
        self.wanted, self.found, self.reduce = wanted, found, reduce

    def run_node(self, n: fx.Node):
        value = super().run_node(n)
        name = n.meta.get(NODE_NAME) if n.op not in ("placeholder", "output") else None
        if name in self.wanted:
            self.found[name] = self.reduce(value)
        return value


def cut_points(traced: Traced, example: torch.Tensor) -> list[str]:
    """The names of the nodes where one tensor crosses a cut after them, in graph order (`example`: an input
    batch whose run records which nodes compute one tensor)."""
    with torch.no_grad():
        ShapeProp(traced.module).propagate(example)
    nodes = traced.nodes
    index = {n: i for i, n in enumerate(nodes)}
    last_use = {n: max((index[u] for u in n.users), default=-1) for n in nodes if n.op != "get_attr"}
    ends: dict[int, int] = {}
    live = 0
    found = []
    for i, node in enumerate(nodes):
        if node.op in ("get_attr", "output"):
            continue
        if last_use[node] > i:
            live += 1
            ends[last_use[node]] = ends.get(last_use[node], 0) + 1
        live -= ends.pop(i, 0)
        one_tensor = isinstance(node.meta.get("tensor_meta"), tuple) and hasattr(node.meta["tensor_meta"], "shape")
        if node.op != "placeholder" and live == 1 and last_use[node] > i and one_tensor:
            found.append(traced.names[node])
    return found


def module_output(traced: Traced, path: str) -> str | None:
    """The name of the last node computed inside module `path` (its output), None when it has none."""
    inside = [
        traced.names[n] for n in traced.nodes if traced.names[n] == path or traced.names[n].startswith(path + ".")
    ]
    return inside[-1] if inside else None


def _piece(traced: Traced, source: fx.Node, body: list[fx.Node], result: fx.Node) -> fx.GraphModule:
    graph = fx.Graph()
    env = {source: graph.placeholder("x")}

    def arg(node: fx.Node) -> fx.Node:
        if node not in env:  # a parameter or buffer read here: copied into every piece that reads it
            if node.op != "get_attr":
                raise ValueError(f"node {traced.names[node]!r} crosses a cut")
            env[node] = graph.node_copy(node, arg)
        return env[node]

    for node in body:
        if node.op != "get_attr":
            env[node] = graph.node_copy(node, arg)
    graph.output(arg(result))
    return fx.GraphModule(traced.module, graph, "Piece")


def pieces(traced: Traced, cuts: list[str]) -> list[tuple[str, nn.Module]]:
    """(cut name, the piece computing it from the cut before) for each cut, then ("head", the rest) unless the
    last cut is the network's output. The pieces share the traced network's modules."""
    nodes = [n for n in traced.nodes if n.op not in ("placeholder", "output")]
    output = next(n for n in traced.nodes if n.op == "output")
    result = output.args[0]
    if not isinstance(result, fx.Node):
        raise ValueError(f"its output is a {type(result).__name__}, not one tensor of logits")
    position = {traced.names[n]: i for i, n in enumerate(nodes)}
    source, start, out = next(n for n in traced.nodes if n.op == "placeholder"), 0, []
    for name in cuts:
        stop = position[name] + 1
        out.append((name, _piece(traced, source, nodes[start:stop], nodes[stop - 1])))
        source, start = nodes[stop - 1], stop
    if source is not result:
        out.append(("head", _piece(traced, source, nodes[start:], result)))
    return out
