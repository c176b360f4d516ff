"""The registries a search space is checked against are declared without PyTorch (`declared.py` in
`sweep.data`, `sweep.models`, `sweep.train`, `sweep.stitching`; `sweep.measures.indices`): reading them, and
`stitchsweep plan` on the quickstart space, import no PyTorch; every implementation they name exists; the
architectures' table agrees with freshly built networks."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import subprocess
import sys

import pytest

from sweep import registry

REGISTRIES = [
    registry.ARCHITECTURES,
    registry.DATASETS,
    registry.AUGMENTATIONS,
    registry.TRAINING_METHODS,
    registry.OBJECTIVES,
    registry.STITCHERS,
    registry.INDICES,
    registry.ATTACKS,
    registry.THREATS,
    registry.OPTIMIZERS,
    registry.SCHEDULES,
]

READ_EVERYTHING = """
import sys
from sweep import registry
from sweep.registry import ARCHITECTURES, DATASETS, OBJECTIVES, OPTIMIZERS, THREATS, TRAINING_METHODS
for r in [getattr(registry, n) for n in dir(registry) if isinstance(getattr(registry, n), registry.Registry)]:
    [r[name] for name in r]
for d in DATASETS.values():
    (d.train_pool, d.test, d.channels, d.image_size, d.num_classes, d.threat, d.missing_files(None))
for a in ARCHITECTURES.values():
    (a.points(), a.stitch_points())
ARCHITECTURES["resnet_tiny"].activation_shapes(1, 28, 10)
ARCHITECTURES["resnet18"].activation_shapes(3, 32, 10)
[(o.fields, o.params, o.dm_init, o.random_start) for o in OBJECTIVES.values()]
[(t.budget, t.default_step(0.1, 10)) for t in THREATS.values()]
[o.momentum for o in OPTIMIZERS.values()]
[(m.fields, m.threat) for m in TRAINING_METHODS.values()]
from sweep.cli import main
sys.argv = ["stitchsweep", "plan", "search_spaces/quickstart.yaml"]
main()
sys.argv = ["stitchsweep", "plan", "search_spaces/quickstart.yaml", "--estimate"]  # what `run` prices its ETA by
main()
heavy = sorted(m for m in ("torch", "torchvision", "pandas", "altair", "ray") if m in sys.modules)
print("HEAVY", heavy)
"""


def test_reading_the_registries_and_planning_and_pricing_the_quickstart_import_no_torch():
    out = subprocess.run([sys.executable, "-c", READ_EVERYTHING], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "HEAVY []", out.stdout[-500:]


def _named(value):
    """The "module:function" names a declared entry's callables carry (`sweep.registry.lazy`)."""
    if isinstance(value, functools.partial):
        return _named(value.func)
    target = getattr(value, "target", None)
    return [target] if isinstance(target, str) else []


@pytest.mark.parametrize("reg", REGISTRIES, ids=lambda r: r.kind)
def test_every_named_implementation_exists(reg):
    names = []
    for name in reg:
        entry = reg[name]
        values = [getattr(entry, f.name) for f in dataclasses.fields(entry)] if dataclasses.is_dataclass(entry) else []
        names += _named(entry) + [t for v in values for t in _named(v)]
    # an index's module holds its math itself, PyTorch imported inside the function: nothing is named
    assert names or reg.kind in ("stitcher", "attack", "similarity index"), f"no implementation named in {reg.kind}"
    for target in names:
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr, None)), f"{reg.kind}: {target} is missing"


def test_every_builtin_architecture_has_one_builder_and_a_table_row():
    from sweep.models import FAMILIES
    from sweep.models.base import BUILDERS
    from sweep.models.declared import BUILTIN, table

    for family in FAMILIES:
        importlib.import_module(f"sweep.models.{family}")
    assert set(BUILDERS) == set(BUILTIN)
    assert set(table()) == set(BUILTIN)


# Cheap to build on a CPU; the others are checked against the table whenever they are built (`build`).
CHEAP = ["resnet_tiny", "wrn28_1", "vgg11", "vit_tiny_cpu", "resnet18_imagenet", "tv_shufflenet_v2_x1_0"]


@pytest.mark.parametrize("arch", CHEAP)
def test_the_table_agrees_with_freshly_built_networks(arch):
    from sweep.models.declared import table
    from tests.scripts.architectures import inputs, row

    assert row(arch, inputs()) == table()[arch]


def test_a_network_that_disagrees_with_the_table_is_refused(monkeypatch):
    from sweep.models import base, declared

    stale = {k: dict(v) for k, v in declared.table().items()}
    stale["resnet_tiny"]["stitch_points"] = ["layer1.0"]
    monkeypatch.setattr(declared, "table", lambda: stale)
    with pytest.raises(RuntimeError, match="tests/scripts/architectures.py --write"):
        base.build("resnet_tiny", 1, 10, (0.5,), (0.5,), 28)


def test_an_input_the_table_lacks_is_measured_on_a_built_network():
    from sweep.registry import ARCHITECTURES

    shapes = ARCHITECTURES["resnet_tiny"].activation_shapes(2, 20, 7)  # no registered dataset has this input
    assert shapes["penultimate"] == (32,) and shapes["layer1.0"] == (8, 10, 10)
