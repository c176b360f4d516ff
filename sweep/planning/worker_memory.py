"""A unit's whole worker memory, before it runs, and how many such units a node holds: what `stitchsweep plan`
says per kind and what `stitchsweep run` fits its concurrency to (`sweep.backends.fit`).

A unit's worker holds its donors (their parameters and floating-point buffers in float32, counted from
`networks.json`: `tests/scripts/network_numbers.py` writes it; a donor being trained, the zoo stage's unit,
`TRAINING` times that: weights, gradients, momentum and the evaluation copy), its images (the pool of every
dataset it reads whole, training pool and test set, and a copy of its own splits, in the dtype the loaders keep
in memory: 8-bit pixels for the datasets whose files hold them, float32 otherwise; a split's test images as
float32; a dataset whose loader reads chosen images alone is not held whole, and what its read holds for a moment,
one training file, is not counted), the frozen halves' activations it keeps through the worker cache (`Kind.held`),
its indices' workspace (each kind's `Kind.memory`, `sweep.planning.memory`: an upper bound, as an index's
activations may be slices of the kept halves), its working memory on the CPU (`Kind.working`: a fit's
activations and gradients in a batch, an evaluation's batch; `sweep.costs.working`), the larger of these two
(computed in phases one after the other), and the runtime (`RUNTIME`: a
worker's resident memory after its imports, measured). A worker runs many units of a stage and its cache keeps
what they read within its budget: the donors and halves counted are those of every unit of the kind, each once,
within the budget (`stage_kept`). Torch-free: planning reads it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sweep.costs.memory import GiB, Need, kept

NETWORKS = Path(__file__).with_name("networks.json")
# A worker's resident memory after its imports (Ray, torch, torchvision, every kind's module): 746 MiB measured on
# a 2-core AMD EPYC CPU (Python 3.11, torch 2.14.1, Ray 2.60; `tests/benchmarks/worker_baseline.py`). A GPU worker
# holds more (CUDA's context is host memory too): state it with `resources.memory_per_trial`.
RUNTIME = 750 * 2**20
IMAGE_BYTES = 4  # images as [0, 1] float32 (`sweep.data`): a split's test images; a loader's own `pixel_bytes`
DONOR_BYTES = 4  # parameters and buffers in float32
TRAINING = 4  # a donor being trained: weights, gradients, the optimiser's momentum, the evaluation copy
RAY_SHARE = 0.7  # of a node's memory Ray gives its tasks by default (the rest: its object store and itself)


@dataclass(frozen=True)
class UnitMemory:
    """A unit's worker need in bytes, by part; `unsized`: its donors' architectures with no numbers known."""

    kind: str
    label: str
    donors: int
    images: int
    indices: int
    runtime: int = RUNTIME
    batch: tuple[str, ...] = ()  # the unit's batch-size fields (section.field = value) that set its need
    unsized: tuple[str, ...] = ()
    halves: int = 0  # the frozen halves' activations the worker keeps through its cache (`Kind.held`)
    working: int = 0  # what the unit allocates and frees in a batch on the CPU (`Kind.working`)

    @property
    def bytes(self) -> int:
        """Its parts in all, the larger of its indices' workspace and its working memory (the unit computes its
        indices in a phase of their own, before its fit and evaluation: they never hold both at once)."""
        return self.donors + self.images + self.halves + max(self.indices, self.working) + self.runtime

    def parts(self) -> str:
        """Its parts in GiB: "donors 0.20, images 0.40, halves 0.50, indices 0.10, working 0.30, runtime 0.73"
        (halves and working: only where there are some)."""
        named = [("donors", self.donors), ("images", self.images), ("halves", self.halves)]
        named += [("indices", self.indices), ("working", self.working), ("runtime", self.runtime)]
        return ", ".join(f"{name} {n / GiB:.2f}" for name, n in named if n or name not in ("halves", "working"))


@cache
def _numbers() -> dict:
    return json.loads(NETWORKS.read_text()) if NETWORKS.exists() else {}


def donor_numbers(arch: str, dataset: str | None) -> int | None:
    """The floating-point numbers (parameters and buffers) `arch` holds on `dataset`'s input; its largest input
    known when that one is not; None for an architecture `networks.json` does not list (a plugin's)."""
    from sweep.models.declared import shapes_key
    from sweep.registry import DATASETS

    row = _numbers().get(arch)
    if not row:
        return None
    if dataset in DATASETS:
        info = DATASETS[dataset]
        key = shapes_key(info.channels, info.image_size, info.num_classes)
        if key in row:
            return row[key]
    return max(row.values())


def _refs(value) -> set[str]:
    """The zoo donors ("zoo:NAME") a unit's field names, in nested tuples and lists too."""
    if isinstance(value, str):
        return {value.partition(":")[2]} if value.startswith("zoo:") else set()
    if isinstance(value, (tuple, list)):
        return set().union(*(_refs(v) for v in value)) if value else set()
    return set()


def _fields(unit) -> dict:
    if dataclasses.is_dataclass(unit):
        return {f.name: getattr(unit, f.name) for f in dataclasses.fields(unit)}
    return dict(vars(unit)) if hasattr(unit, "__dict__") else {}


def _donors(unit, sweep, trained: bool, training: bool = True) -> tuple[dict[str, int], tuple[str, ...]]:
    """The donors a unit holds, by name, in bytes, and the architectures not sized. A zoo-stage unit (`trained`)
    holds its own donor, `TRAINING` times its numbers where it trains it (`training`)."""
    fields = _fields(unit)
    donors = {n: sweep.donors[n] for n in sorted(_refs(list(fields.values()))) if n in sweep.donors}
    if trained:  # a zoo-stage unit: its donor, trained there unless read from a file
        donors, trained = {unit.name: unit}, training and getattr(unit, "source", "zoo") == "zoo"
    out, unsized = {}, []
    for name, donor in donors.items():
        data = getattr(donor, "data", None)
        dataset = getattr(data, "dataset", None) or fields.get("dataset")
        n = donor_numbers(donor.arch, dataset) if getattr(donor, "arch", None) else 0
        if n is None:
            unsized.append(donor.arch)
        out[name] = (n or 0) * DONOR_BYTES * (TRAINING if trained else 1)
    return out, tuple(unsized)


def _kept_by(kind, work, sweep) -> dict:
    """The frozen halves' parts a unit keeps through the worker cache (`Kind.held`), by what names each."""
    from sweep.registry import resolve

    return dict(resolve(kind.held)(work, sweep)) if kind.held is not None else {}


def stage_kept(kind, units, sweep) -> tuple[dict, dict]:
    """What a worker that runs every one of `units` (`kind`'s) keeps through its cache at most: each donor they
    read (name -> bytes, in float32) and each frozen half's part (`Kind.held`), each once."""
    from sweep.kinds.donor.units import DonorWork

    donors: dict = {}
    halves: dict = {}
    for work in units:
        trains = isinstance(work, DonorWork)  # the zoo stage's: the worker keeps the donor, trained, once
        donors.update(_donors(work.donor if trains else work, sweep, trained=trains, training=False)[0])
        for part, b in _kept_by(kind, work, sweep).items():  # the most any unit reads of it
            halves[part] = max(b, halves.get(part, 0))
    return donors, halves


def image_bytes(dataset: str, stored: bool = True) -> int:
    """Bytes of one image of `dataset` as its loader keeps it (`DatasetInfo.pixel_bytes`: the pool, a split's
    training and validation images), or as [0, 1] floats (`stored=False`: a split's test images)."""
    from sweep.registry import DATASETS

    info = DATASETS[dataset]
    return (info.pixel_bytes if stored else IMAGE_BYTES) * info.channels * info.image_size**2


def _images(unit) -> int:
    """A copy of the unit's own splits, and the pools (training pool and test set) of the datasets it reads that
    are read whole: those whose loader reads no chosen images alone (`DatasetInfo.load_rows`, `load_test`), and
    every one with the worker cache off (`load_pool`'s per-process copy)."""
    from sweep.costs.pricer import sizes
    from sweep.registry import DATASETS
    from sweep.worker.cache import cache_on

    fields = _fields(unit)
    data = fields.get("data")
    dataset = fields.get("dataset") or getattr(data, "dataset", None)
    read = {dataset, fields.get("front_dataset"), fields.get("end_dataset"), *(fields.get("ood_outliers") or ())}
    read = {d for d in read if isinstance(d, str) and d in DATASETS}
    whole = [d for d in read if not (cache_on() and DATASETS[d].load_rows and DATASETS[d].load_test)]
    pools = sum((DATASETS[d].train_pool + DATASETS[d].test) * image_bytes(d) for d in whole)
    if dataset not in DATASETS:
        return pools
    source = data if data is not None else unit
    train, val, test = (getattr(source, f, None) for f in ("train_size", "val_size", "test_size"))
    train, val, test = sizes(dataset, train, val or 0, test)
    return pools + (train + val) * image_bytes(dataset) + test * image_bytes(dataset, stored=False)


def _batches(kind, unit, trains: bool) -> tuple[str, ...]:
    fields = _fields(unit)
    found = [(k, v) for k, v in fields.items() if "batch" in k and isinstance(v, int) and v]
    where = f"donors.{unit.name}" if trains else kind.section or kind.name
    return tuple(f"{where}.{k} = {v:,}" for k, v in found)


def unit_memory(kind, unit, sweep, indices: Need | None = None, stage: tuple[dict, dict] | None = None) -> UnitMemory:
    """The worker memory of `kind`'s `unit` of `sweep` (`indices`: its `Kind.memory` need, when sized; `stage`:
    what the worker keeps of the stage's other units, `stage_kept`, default: of this unit alone). The cache keeps
    the other units' donors and every unit's halves within its budget (`memory_budget`), donors first."""
    from sweep.kinds.donor.units import DonorWork
    from sweep.registry import resolve
    from sweep.worker.cache import memory_budget

    trains = isinstance(unit, DonorWork)  # the zoo stage's unit: one donor, trained or loaded, and evaluated
    work, unit = unit, unit.donor if trains else unit
    own, unsized = _donors(unit, sweep, trained=trains)
    donors, parts = stage if stage is not None else ({}, _kept_by(kind, work, sweep))
    budget = memory_budget()
    others = min(budget, sum(b for name, b in donors.items() if name not in own))
    halves = kept(list(parts.values()), budget - others)
    batch = _batches(kind, unit, trains) + ((f"{indices.field} = {indices.n:,}",) if indices else ())
    label = getattr(unit, "label", None) or getattr(unit, "name", None) or kind.name
    working = resolve(kind.working)(work, sweep) if kind.working is not None and not sweep.gpus_per_trial else 0
    return UnitMemory(kind.name, str(label), sum(own.values()) + others, _images(unit),
                      indices.bytes if indices else 0, RUNTIME, batch, unsized, halves, working)  # fmt: skip


def unit_needs(sweep, units: dict[str, dict] | None = None) -> dict[str, UnitMemory]:
    """Each kind's largest unit's worker need (`units`: kind -> {id: unit}, default: every unit of the space), with
    what a worker that runs the kind's other units keeps of them (`stage_kept`)."""
    from sweep.registry import KINDS, resolve

    out: dict[str, UnitMemory] = {}
    for name, kind in KINDS.items():
        chosen = (units or {}).get(name) if units is not None else kind.units(sweep)
        chosen = list((chosen or {}).values())
        size = resolve(kind.memory) if kind.memory is not None and kind.section is not None else None
        stage = stage_kept(kind, chosen, sweep) if chosen else None
        for unit in chosen:
            need = unit_memory(kind, unit, sweep, size(unit, sweep) if size else None, stage)
            if name not in out or need.bytes > out[name].bytes:
                out[name] = need
    return out


def machine_memory() -> int:
    """This machine's total memory in bytes (/proc/meminfo's MemTotal, else the page count)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def holds(node_bytes: float, unit_bytes: int) -> int:
    """How many units of `unit_bytes` a node that gives its tasks `node_bytes` holds at once (0: none)."""
    return int(node_bytes // unit_bytes) if unit_bytes > 0 else 0


def plan_lines(
    sweep, units: dict[str, dict] | None = None, machine: int | None = None, nodes: list[dict] | None = None
) -> list[str]:
    """`plan`'s lines: each kind's largest unit's worker need by part, and how many this machine holds at once
    (of its memory, the share Ray gives its tasks, `RAY_SHARE`); with `nodes` (a cluster's live nodes: each a
    name and the bytes Ray gives its tasks there, `plan --address`), how many each node holds instead."""
    total = machine or machine_memory()
    lines = []
    for need in unit_needs(sweep, units).values():
        unsized = f"; {', '.join(sorted(set(need.unsized)))} not sized" if need.unsized else ""
        article = "an" if need.kind[0] in "aeiou" else "a"
        head = f"memory: {article} {need.kind} unit needs about {need.bytes / GiB:.1f} GiB ({need.parts()}{unsized})"
        if nodes is not None:
            lines.append(f"{head}; {_on_nodes(nodes, need.bytes)}")
            continue
        n = holds(RAY_SHARE * total, need.bytes)
        lines.append(
            f"{head}; this machine ({total / GiB:.1f} GiB) holds {n} at once"
            + ("" if n else ": it fits on no node of this machine's size")
        )
    if lines and nodes is None:
        lines.append("memory: on a cluster (`run --address`), run fits the units to each node's memory")
    return lines


def _on_nodes(nodes: list[dict], unit_bytes: int) -> str:
    """How many units of `unit_bytes` each node holds, and the cluster in all."""
    counts = [(n["name"], n["memory"], holds(n["memory"], unit_bytes)) for n in nodes]
    each = ", ".join(f"{name} ({mem / GiB:.1f} GiB for tasks) {k}" for name, mem, k in counts)
    total = sum(k for _, _, k in counts)
    return f"the cluster holds {total} at once: {each}" + ("" if total else "; it fits on no node")
