"""Plugins: a user's own modules (a `.py` file relative to the space, or an importable module name), imported
before a space is validated so that the architectures, indices, objectives and kinds they register validate,
plan, run and report like shipped ones; their versions, which enter the ids of the units that use them; and the
copies a sweep keeps of them (`RESULTS/plugins/`), so that a moved or edited original changes no recorded sweep.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from sweep.config.errors import SpecError
from sweep.registry import PLUGIN_VERSIONS

PLUGIN_DIR = "plugins"  # RESULTS/plugins/<module>.py: the sweep's copies of its plugin files
EXPECTED = "a Python file (relative to the space) or an importable module name"


@dataclass(frozen=True)
class Plugin:
    """One loaded plugin: as written, the module it is imported as, its file and its version."""

    spec: str
    module: str
    path: Path | None  # the file imported (None: a module of the environment, e.g. `mylab.indices`)
    version: str

    @property
    def is_file(self) -> bool:
        return self.spec.endswith(".py")


def source_version(source: bytes) -> str:
    """A plugin's version: its PLUGIN_VERSION string when it sets one, else a hash of its source."""
    try:
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PLUGIN_VERSION" for t in node.targets):
                return str(ast.literal_eval(node.value))
    except (SyntaxError, ValueError):
        pass  # its import says what is wrong
    return hashlib.sha256(source).hexdigest()[:12]


def _fail(field: str, spec: str, exc: BaseException) -> SpecError:
    lines = str(exc).strip().splitlines()
    where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
    return SpecError(field, "a plugin that imports", spec, f"{type(exc).__name__}: {lines[0] if lines else ''}{where}")


def _import_file(path: Path, module: str, field: str, spec: str):
    loaded = sys.modules.get(module)
    file = Path(getattr(loaded, "__file__", "") or "")
    # loaded already (the same file, or a sweep's copy of it): its registrations stand
    if loaded is not None and file.is_file() and source_version(file.read_bytes()) == source_version(path.read_bytes()):
        return loaded
    if loaded is not None:
        raise SpecError(field, "a plugin file whose name no other module has", spec, f"{module!r} is {loaded!r}")
    loader_spec = importlib.util.spec_from_file_location(module, path)
    mod = importlib.util.module_from_spec(loader_spec)
    sys.modules[module] = mod  # before it runs: its functions pickle by reference to it
    try:
        loader_spec.loader.exec_module(mod)
    except Exception as exc:
        del sys.modules[module]
        raise _fail(field, spec, exc) from None
    return mod


def load_plugin(spec: object, base: Path, field: str) -> Plugin:
    """Import one plugin (a file relative to `base`, or a module name) and record its version."""
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError(field, EXPECTED, spec)
    if spec.endswith(".py"):
        path = (base / spec).resolve()
        if not path.is_file():
            raise SpecError(field, EXPECTED, spec, f"no such file: {path}")
        module = path.stem
        if not module.isidentifier():
            raise SpecError(field, "a file named like a Python module (letters, digits, '_')", spec)
        version = source_version(path.read_bytes())
        PLUGIN_VERSIONS[module] = version  # before its import: what it registers is versioned from the start
        _import_file(path, module, field, spec)
        return Plugin(spec, module, path, version)
    try:
        mod = importlib.import_module(spec)
    except Exception as exc:
        raise _fail(field, spec, exc) from None
    file = Path(mod.__file__) if getattr(mod, "__file__", None) else None
    version = source_version(file.read_bytes()) if file else "0"
    PLUGIN_VERSIONS[spec] = version
    return Plugin(spec, spec, file, version)


def load_plugins(specs: object, base: Path, field: str = "plugins") -> tuple[Plugin, ...]:
    """Import the plugins a space (or `--plugin`) lists, in order."""
    if specs is None:
        return ()
    if not isinstance(specs, list):
        raise SpecError(field, f"a list of plugins, each {EXPECTED}", specs)
    return tuple(load_plugin(s, base, f"{field}[{i}]") for i, s in enumerate(specs))


def import_on_worker(plugins: list[tuple[str, str]]) -> None:
    """On a Ray worker: import each plugin module (shipped by `runtime_env` `py_modules`) so that it registers
    its entries in this process, and check that it is the code the driver planned with."""
    for module, version in plugins:
        mod = importlib.import_module(module)
        file = getattr(mod, "__file__", None)
        found = source_version(Path(file).read_bytes()) if file else "0"
        if found != version:
            raise RuntimeError(f"plugin {module}: the worker has version {found}, the driver planned {version}")
        PLUGIN_VERSIONS[module] = version


def ray_modules(plugins: tuple[Plugin, ...]) -> list:
    """What `runtime_env` `py_modules` ships of `plugins`: each file (Ray 2.60 takes a single `.py` file), and
    the top-level package of each module name."""
    shipped: list = []
    for p in plugins:
        if p.is_file:
            shipped.append(str(p.path))
        else:
            top = sys.modules[p.module.split(".")[0]]
            if top not in shipped:
                shipped.append(top)
    return shipped


def recorded(plugins: tuple[Plugin, ...]) -> list[str]:
    """The `plugins:` list of a sweep's own `space.yaml`: its files as the copies in `RESULTS/plugins/`."""
    return [f"{PLUGIN_DIR}/{p.module}.py" if p.is_file else p.spec for p in plugins]


def localise(folder, specs: object) -> Path:
    """A folder on this machine holding the plugin files a space on remote storage (`folder`, a `Loc`) lists:
    they are imported from there."""
    import tempfile

    local = Path(tempfile.mkdtemp(prefix="stitchsweep-plugins-"))
    for spec in specs if isinstance(specs, list) else ():
        if isinstance(spec, str) and spec.endswith(".py") and not Path(spec).is_absolute():
            target = local / spec
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((folder / spec).read_bytes())
    return local


def keep_plugins(sweep, sweep_dir) -> dict:
    """Copy `sweep`'s plugin files into `RESULTS/plugins/` and return its expanded space listing the copies:
    what `resume`, `status` and `report` import, whatever becomes of the originals."""
    if not sweep.plugins:
        return sweep.raw
    for p in sweep.plugins:
        if p.is_file:
            (sweep_dir.path / PLUGIN_DIR / f"{p.module}.py").write_bytes(p.path.read_bytes())
    return {**sweep.raw, "plugins": recorded(sweep.plugins)}


def recorded_versions(sweep_dir) -> dict[str, str]:
    """Module -> version of the plugin copies a sweep's results folder holds (empty: none recorded)."""
    folder = sweep_dir.path / PLUGIN_DIR
    if not folder.exists():
        return {}
    return {q.name[:-3]: source_version(q.read_bytes()) for q in folder.files(".py")}


def plugin_frame(tb) -> tuple[str, int, str] | None:
    """(file name, line, function) of the innermost frame of traceback `tb` that runs a plugin module's code
    (a module `load_plugin` imported, here or on a worker): where the user's own code was when it failed."""
    found = None
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module in PLUGIN_VERSIONS or module.split(".")[0] in PLUGIN_VERSIONS:
            code = tb.tb_frame.f_code
            found = (Path(code.co_filename).name, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def describe_failure(exc: BaseException) -> str:
    """What a unit records of the exception that failed it: its type and message, and where the traceback last
    passed through a plugin's code (`my_models.py:42 in forward`), so that a user reads their own file and line
    without the worker's log."""
    text = f"{type(exc).__name__}: {exc}"
    at = plugin_frame(exc.__traceback__)
    return f"{text} (at {at[0]}:{at[1]} in {at[2]})" if at else text
