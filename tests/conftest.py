import atexit
import copy
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent

# The workers' node-level activation cache of this test session (its Ray workers inherit it): its own folder,
# so a run of the suite neither reads nor leaves files in the machine's shared one.
if "STITCHSWEEP_CACHE_DIR" not in os.environ:
    _CACHE_DIR = tempfile.mkdtemp(prefix="stitchsweep-cache-tests-")
    os.environ["STITCHSWEEP_CACHE_DIR"] = _CACHE_DIR
    # removed when the session ends (it grows to about 2 GB of activation files): runs must not fill the disk
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)

# A search space small enough to run end to end in seconds: scikit-learn's digits, one tiny donor.
TINY_SPACE = {
    "name": "tiny",
    "data": {"dataset": "digits", "train_size": None, "val_size": 200, "test_size": None},
    "donors": {
        "plain_a": {"arch": "resnet_tiny", "training": "plain", "epochs": 4, "lr": 0.1, "seed": 0},
    },
    "stitching": {
        "pairs": [{"front": "zoo:plain_a", "end": "zoo:plain_a"}],
        "stitch_points": ["layer1.0", "layer3.1"],
        "objectives": ["tlm", "dm"],
        "epochs": 1,
        "lr": 0.01,
        "dm_samples": 100,
    },
    "evaluation": {"eps": 0.3, "iterations": 2, "n_eval_robust": 16},
}


@pytest.fixture
def tiny_space() -> dict:
    return copy.deepcopy(TINY_SPACE)


@pytest.fixture
def write_space(tmp_path):
    def write(space: dict, name: str = "space.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(space, sort_keys=False))
        return path

    return write


@pytest.fixture
def registered():
    """`registered(REGISTRY, name, entry)` adds an entry to a registry for one test (removed afterwards): how
    a test extends the engine the way a plugin would, without patching it."""
    added = []

    def add(registry, name, entry):
        registry.add(name, entry)
        added.append((registry, name))
        return entry

    yield add
    for registry, name in reversed(added):
        registry.remove(name)


@pytest.fixture
def plugin_file(tmp_path):
    """`plugin_file(source) -> (path, module)`: a plugin file of a fresh module name in `tmp_path`, imported as a
    space's `plugins:` entry is (so its frames and versions are a plugin's); what it registered is removed
    afterwards (registries are per process)."""
    import sys
    import uuid

    from sweep import registry
    from sweep.config.plugins import load_plugins

    loaded = []

    def write(source: str, name: str | None = None) -> tuple[Path, str]:
        module = name or f"plug_{uuid.uuid4().hex[:8]}"
        path = tmp_path / f"{module}.py"
        path.write_text(source)
        load_plugins([path.name], tmp_path)
        loaded.append(module)
        return path, module

    yield write
    from sweep.store import catalogue

    found = [*vars(registry).values(), *vars(catalogue).values()]
    registries = [r for r in found if isinstance(r, registry.Registry)]
    for module in loaded:
        for kind, name in [key for key, origin in registry.ORIGINS.items() if origin == module]:
            for r in registries:
                if r.kind == kind and name in r._entries:
                    r.remove(name)
        sys.modules.pop(module, None)
        registry.PLUGIN_VERSIONS.pop(module, None)


@pytest.fixture
def full_disk(monkeypatch):
    """`full_disk(match, after=0, times=None)`: from now on the writes of the store's writers (`Loc.write_bytes`:
    parts, curves, compacted files, checkpoints, manifests) to a path containing `match`, but the first `after`
    ones, write half their bytes and then fail as a full disk does (OSError ENOSPC), `times` of them (None: all;
    1: space freed at once, so a smaller file written next would fit); `full_disk(None)` frees the disk. Returns
    the paths that failed."""
    import errno

    from sweep.store.storage import Loc

    real, state = Loc._stream, {"match": None, "after": 0, "times": None, "hits": []}

    def stream(self, path: str, data: bytes) -> None:
        if state["match"] is None or state["match"] not in path.replace("/.tmp-", "/"):  # the file it will be
            return real(self, path, data)
        if state["after"] > 0 or state["times"] == 0:
            state["after"] = max(0, state["after"] - 1)
            return real(self, path, data)
        state["hits"].append(path)
        state["times"] = None if state["times"] is None else state["times"] - 1
        with self.fs.open_output_stream(path) as fh:
            fh.write(data[: len(data) // 2])  # what fitted
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(Loc, "_stream", stream)

    def fill(match: str | None, after: int = 0, times: int | None = None) -> list[str]:
        state.update(match=match, after=after, times=times)
        return state["hits"]

    return fill


@pytest.fixture
def forget_plugins():
    """`forget(module)`: at the end of the test, remove what plugin `module` (a file's module, or a package and
    each of its modules) registered in this process, the modules themselves and their versions (registries are
    per process)."""
    import sys

    from sweep import registry
    from sweep.config import plugins
    from sweep.store import catalogue

    modules: list[str] = []
    yield modules.append

    def ours(name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in modules)

    found = [*vars(registry).values(), *vars(catalogue).values()]
    registries = [r for r in found if isinstance(r, registry.Registry)]
    for kind, name in [key for key, origin in registry.ORIGINS.items() if ours(origin)]:
        for r in registries:
            if r.kind == kind and name in r._entries:
                r.remove(name)
    for name in [n for n in [*sys.modules, *registry.PLUGIN_VERSIONS] if ours(n)]:
        sys.modules.pop(name, None)
        registry.PLUGIN_VERSIONS.pop(name, None)
    plugins._PACKAGES.difference_update(modules)


# docs/plugins.md's "A kind of work and an index": each file it shows, fenced as ```python PATH or ```yaml PATH.
PLUGIN_PAGE_FILE = r"```(?:python|yaml) ([\w./]+)\n(.*?)```"


@pytest.fixture
def kind_plugin(tmp_path, forget_plugins):
    """`kind_plugin(folder=None) -> folder`: docs/plugins.md's kind of work (the package `echo/`), index
    (`my_index.py`) and space (`space.yaml`) written into `folder` (default: `tmp_path / "study"`) as the page
    shows them; what they register in this process is removed after the test."""
    import re

    page = (REPO / "docs" / "plugins.md").read_text()
    shown = dict(re.findall(PLUGIN_PAGE_FILE, page, flags=re.S))

    def write(folder: Path | None = None) -> Path:
        folder = folder or tmp_path / "study"
        for rel, text in shown.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
        forget_plugins("echo")
        forget_plugins("my_index")
        return folder

    return write
