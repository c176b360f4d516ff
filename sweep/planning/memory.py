"""How much memory the units need, before they run: `stitchsweep plan` prints the largest need of each kind, and
with `resources.memory_per_trial` set, a space whose unit would not fit is refused with the number, the field to
change and the largest value of it that fits.

Each kind of work sizes its own units (`Kind.memory`, in its package's `cost.py`: a stitching trial's and a
representation test's indices on their images, the similarity kinds' CKA estimators, a t-SNE unit's held
activations); the primitives (`Need`, `ShapePair`, the index workspaces' generic model) are
`sweep.costs.memory`'s, and each index's own model is in its module of `sweep.measures.indices`
(`Index.memory`). The activations are counted once per side (a worker's activation cache holds them anyway);
the models, the data and the runtime come on top (about 1-2 GB on a CPU worker).
`tests/benchmarks/index_memory.py` measures each index's peak against this model (docs/performance.md).
Torch-free: planning reads it.
"""

from __future__ import annotations

from sweep.costs.memory import (
    GiB,
    Need,
    gib,
)


def needs(sweep) -> list[Need]:
    """Every sized unit's need (each kind's `Kind.memory`), kind by kind in registration order."""
    from sweep.registry import KINDS, resolve

    out = []
    for kind in KINDS.values():
        if kind.memory is not None and kind.section is not None:
            need = resolve(kind.memory)
            out += [need(unit, sweep) for unit in sweep.units.get(kind.name, ())]
    return [x for x in out if x]


def plan_lines(sweep) -> list[str]:
    """`plan`'s memory lines: the largest need of each kind, against `resources.memory_per_trial` if set."""
    by_kind: dict[str, Need] = {}
    for need in needs(sweep):
        if need.kind not in by_kind or need.bytes > by_kind[need.kind].bytes:
            by_kind[need.kind] = need
    return [
        f"memory: the largest {need.kind} unit's measures need {gib(need.bytes)} ({need.largest} on"
        f" {need.field} = {need.n:,}: {need.label})"
        for need in by_kind.values()
    ]


def check(sweep) -> None:
    """Refuse a space whose unit's indices need more than `resources.memory_per_trial` (when it is set)."""
    from sweep.config.errors import SpecError

    budget = getattr(sweep, "memory_per_trial", None)
    if not budget:
        return
    limit = int(budget * GiB)
    over = [need for need in needs(sweep) if need.bytes > limit]
    if over:
        need = max(over, key=lambda x: x.bytes)
        fits = min(x.most_images(limit) for x in over if x.field == need.field)
        instead = need.instead or f"or drop {need.largest}"
        raise SpecError(
            "resources.memory_per_trial",
            f"room for every unit's indices: {need.label} needs {gib(need.bytes)} ({need.largest} on"
            f" {need.field} = {need.n:,})",
            budget,
            f"lower {need.field} to {fits:,} or fewer, raise memory_per_trial, {instead}"
            if fits
            else f"raise memory_per_trial, {instead}",
        )
