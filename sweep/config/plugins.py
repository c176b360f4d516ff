"""Plugins: a user's own modules, imported before a space is validated so that the architectures, indices,
objectives and kinds they register validate, plan, run and report like shipped ones; their versions, which
enter the ids of the units that use them; and the copies a sweep keeps of them (`RESULTS/plugins/`), so that a
moved or edited original changes no recorded sweep.

A plugin is written one of three ways (`plugin_form`): a `.py` file relative to the space (`my_models.py`,
imported as `my_models`); a package folder relative to the space, one holding an `__init__.py` (`echo/`, or
`echo` when `echo/__init__.py` is beside the space; imported as `echo`, its modules as `echo.run`, ...); or
the name of a module the environment imports (`mylab.indices`).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import posixpath
import sys
from dataclasses import dataclass
from pathlib import Path

from sweep.config.errors import SpecError
from sweep.config.failures import PACKAGES as _PACKAGES  # the package folders imported as plugins
from sweep.config.failures import plugin_frame
from sweep.registry import PLUGIN_VERSIONS

PLUGIN_DIR = "plugins"  # RESULTS/plugins/<module>.py and RESULTS/plugins/<package>/: the sweep's copies
EXPECTED = "a Python file or a package folder (relative to the space), or an importable module name"
FILE, FOLDER, MODULE = "file", "folder", "module"


@dataclass(frozen=True)
class Plugin:
    """One loaded plugin: as written, the module it is imported as, its file or folder, its version and its
    form (`FILE`, `FOLDER` or `MODULE`)."""

    spec: str
    module: str
    path: Path | None  # the file or the package folder imported (None: a module of the environment without one)
    version: str
    form: str = ""

    def __post_init__(self) -> None:
        if not self.form:  # frozen: the default is filled in once
            object.__setattr__(self, "form", FILE if self.spec.endswith(".py") else MODULE)

    @property
    def is_file(self) -> bool:
        return self.form == FILE

    @property
    def is_folder(self) -> bool:
        return self.form == FOLDER


def declared_version(source: bytes) -> str | None:
    """The `PLUGIN_VERSION = "..."` string a module's source sets at its top level, if any."""
    try:
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PLUGIN_VERSION" for t in node.targets):
                return str(ast.literal_eval(node.value))
    except (SyntaxError, ValueError):
        pass  # its import says what is wrong
    return None


def source_version(source: bytes) -> str:
    """A plugin file's version: its PLUGIN_VERSION string when it sets one, else a hash of its source."""
    own = declared_version(source)
    return own if own is not None else hashlib.sha256(source).hexdigest()[:12]


def _kept(rel: str) -> bool:
    """Whether a file of a package plugin (its path relative to the folder) is part of it: not hidden, not in a
    hidden folder or `__pycache__`."""
    return not any(part.startswith(".") or part == "__pycache__" for part in rel.split("/"))


def package_sources(folder) -> dict[str, bytes]:
    """Relative path ('run.py', 'sub/x.py') -> source of every `.py` file below a package folder (a `Path`, or a
    `Loc` of any storage), hidden files and folders and `__pycache__` left out."""
    if isinstance(folder, Path):
        found = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*.py")}
    else:
        found = {posixpath.relpath(p.path, folder.path): p for p in folder.rglob("*.py")}
    return {rel: loc.read_bytes() for rel, loc in sorted(found.items()) if _kept(rel)}


def package_version(sources: dict[str, bytes]) -> str:
    """A package plugin's version: the PLUGIN_VERSION string its `__init__.py` sets, else a hash over all its
    `.py` files (`package_sources`), in the order of their relative paths, each with its path."""
    own = declared_version(sources.get("__init__.py", b""))
    if own is not None:
        return own
    digest = hashlib.sha256()
    for rel in sorted(sources):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(sources[rel]).digest())
    return digest.hexdigest()[:12]


def folder_version(folder) -> str:
    """The version of the package plugin in `folder` (a `Path` or a `Loc`)."""
    return package_version(package_sources(folder))


def _submodules(module: str, sources: dict[str, bytes]) -> list[str]:
    """The dotted names of a package's modules: 'echo', 'echo.run', 'echo.sub', 'echo.sub.x'."""
    names = []
    for rel in sources:
        parts = rel[: -len(".py")].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join([module, *parts]))
    return names


def _set_versions(module: str, version: str, sources: dict[str, bytes] | None = None) -> None:
    """Record a plugin's version under its module name, and under each module of a package (an entry registered
    by `echo.kind`'s import is versioned as `echo`'s)."""
    PLUGIN_VERSIONS[module] = version
    for name in _submodules(module, sources) if sources is not None else ():
        PLUGIN_VERSIONS[name] = version


def plugin_form(spec: str, base) -> str:
    """How a `plugins:` entry is read: a name ending in `.py` is a file (`FILE`); one with a `/` is a package
    folder (`FOLDER`: `echo/`, `plugins/echo/`, an absolute path); a bare name is the package folder beside
    `base` (a `Path` or a `Loc`) when that holds an `__init__.py`, else a module to import (`MODULE`)."""
    if spec.endswith(".py"):
        return FILE
    if "/" in spec or os.sep in spec:
        return FOLDER
    try:
        beside = (base / spec / "__init__.py").is_file()
    except (OSError, ValueError):
        beside = False
    return FOLDER if beside else MODULE


def absolute(spec: object, base: Path) -> object:
    """A `--plugin` argument made independent of the working directory `base` (files and folders are relative
    to it, not to the space): the absolute path of a file or folder, a module name as it is."""
    if not isinstance(spec, str) or not spec.strip() or plugin_form(spec, base) == MODULE:
        return spec
    return str((base / spec).resolve())


def _fail(field: str, spec: str, exc: BaseException, package: Path | None = None) -> SpecError:
    """The one line of a plugin that fails to import: its error, and the line (of a package: the file and line)
    it came from."""
    lines = str(exc).strip().splitlines()
    where = ""
    if isinstance(exc, SyntaxError) and exc.lineno:
        where = f" (line {exc.lineno})"
        if package is not None and exc.filename and Path(exc.filename).is_relative_to(package.parent):
            lines = [exc.msg]  # its file named below, from the package's folder
            where = f" ({Path(exc.filename).relative_to(package.parent).as_posix()} line {exc.lineno})"
    elif package is not None and (at := plugin_frame(exc.__traceback__)):
        where = f" (at {at[0]}:{at[1]})"
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


def _package_folder(mod) -> Path | None:
    """The folder of an imported package (None: a module that is not a package of one folder)."""
    paths = list(getattr(mod, "__path__", None) or ())
    file = getattr(mod, "__file__", None)
    if len(paths) != 1 or not file or Path(file).name != "__init__.py":
        return None
    return Path(paths[0])


def _import_package(path: Path, module: str, version: str, before: str | None, field: str, spec: str):
    loaded = sys.modules.get(module)
    if loaded is not None:  # loaded already (the same folder, or a sweep's copy of it): its registrations stand
        folder = _package_folder(loaded)  # gone since (moved): the version it was loaded with
        found = (folder_version(folder) if folder.is_dir() else before) if folder is not None else None
        if found == version:
            return loaded
        raise SpecError(field, "a plugin folder whose name no other module has", spec, f"{module!r} is {loaded!r}")
    loader_spec = importlib.util.spec_from_file_location(
        module, path / "__init__.py", submodule_search_locations=[str(path)]
    )
    mod = importlib.util.module_from_spec(loader_spec)
    sys.modules[module] = mod  # before it runs: its modules import each other (`from echo.spec import ...`)
    try:
        loader_spec.loader.exec_module(mod)
    except Exception as exc:
        for name in [n for n in sys.modules if n == module or n.startswith(module + ".")]:
            del sys.modules[name]
        raise _fail(field, spec, exc, path) from None
    return mod


def _load_folder(spec: str, base: Path, field: str) -> Plugin:
    path = (base / spec.rstrip("/" + os.sep)).resolve()
    if not path.is_dir():
        raise SpecError(field, EXPECTED, spec, f"no such folder: {path}")
    if not (path / "__init__.py").is_file():
        raise SpecError(field, "a package folder (one holding an __init__.py)", spec, f"no {path / '__init__.py'}")
    module = path.name
    if not module.isidentifier():
        raise SpecError(field, "a folder named like a Python package (letters, digits, '_')", spec)
    sources = package_sources(path)
    version, before = package_version(sources), PLUGIN_VERSIONS.get(module)
    recorded = dict(PLUGIN_VERSIONS)
    _set_versions(module, version, sources)  # before its import: what it registers is versioned from the start
    _PACKAGES.add(module)
    try:
        _import_package(path, module, version, before, field, spec)
    except SpecError:  # refused, or failed: the versions are those of the code that is loaded
        PLUGIN_VERSIONS.clear()
        PLUGIN_VERSIONS.update(recorded)
        raise
    return Plugin(spec, module, path, version, FOLDER)


def load_plugin(spec: object, base: Path, field: str) -> Plugin:
    """Import one plugin (a file or a package folder relative to `base`, or a module name) and record its
    version."""
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError(field, EXPECTED, spec)
    form = plugin_form(spec, base)
    if form == FOLDER:
        return _load_folder(spec, base, field)
    if form == FILE:
        path = (base / spec).resolve()
        if not path.is_file():
            raise SpecError(field, EXPECTED, spec, f"no such file: {path}")
        module = path.stem
        if not module.isidentifier():
            raise SpecError(field, "a file named like a Python module (letters, digits, '_')", spec)
        version, before = source_version(path.read_bytes()), PLUGIN_VERSIONS.get(module)
        PLUGIN_VERSIONS[module] = version  # before its import: what it registers is versioned from the start
        try:
            _import_file(path, module, field, spec)
        except SpecError:  # refused, or failed: the version is that of the code that is loaded, if any
            PLUGIN_VERSIONS.pop(module) if before is None else PLUGIN_VERSIONS.update({module: before})
            raise
        return Plugin(spec, module, path, version, FILE)
    try:
        mod = importlib.import_module(spec)
    except Exception as exc:
        raise _fail(field, spec, exc) from None
    file = Path(mod.__file__) if getattr(mod, "__file__", None) else None
    version = source_version(file.read_bytes()) if file else "0"
    PLUGIN_VERSIONS[spec] = version
    return Plugin(spec, spec, file, version, MODULE)


def load_plugins(specs: object, base: Path, field: str = "plugins") -> tuple[Plugin, ...]:
    """Import the plugins a space (or `--plugin`) lists, in order."""
    if specs is None:
        return ()
    if not isinstance(specs, list):
        raise SpecError(field, f"a list of plugins, each {EXPECTED}", specs)
    return tuple(load_plugin(s, base, f"{field}[{i}]") for i, s in enumerate(specs))


def import_on_worker(plugins: list[tuple]) -> None:
    """On a Ray worker: import each plugin module (shipped by `runtime_env` `py_modules`: a file, or a package
    folder) so that it registers its entries in this process, and check that it is the code the driver planned
    with. Each entry is (module, version) or (module, version, form)."""
    for module, version, *rest in plugins:
        form = rest[0] if rest else MODULE
        mod = importlib.import_module(module)
        folder = _package_folder(mod) if form == FOLDER else None
        if folder is not None:
            sources = package_sources(folder)
            found = package_version(sources)
            _PACKAGES.add(module)
        else:
            sources = None
            file = getattr(mod, "__file__", None)
            found = source_version(Path(file).read_bytes()) if file else "0"
        if found != version:
            raise RuntimeError(f"plugin {module}: the worker has version {found}, the driver planned {version}")
        _set_versions(module, version, sources)


def worker_plugins(plugins: tuple[Plugin, ...]) -> list[tuple[str, str, str]]:
    """What a worker is told of `plugins` (`import_on_worker`): each one's module, version and form."""
    return [(p.module, p.version, p.form) for p in plugins]


def ray_modules(plugins: tuple[Plugin, ...]) -> list:
    """What `runtime_env` `py_modules` ships of `plugins`: each file (Ray 2.60 takes a single `.py` file), each
    package folder (a local directory: Ray uploads it and puts its parent on the workers' path, so it imports
    by its folder's name), and the top-level package of each module name."""
    shipped: list = []
    for p in plugins:
        if p.is_file or p.is_folder:
            shipped.append(str(p.path))
        else:
            top = sys.modules[p.module.split(".")[0]]
            if top not in shipped:
                shipped.append(top)
    return shipped


def recorded(plugins: tuple[Plugin, ...]) -> list[str]:
    """The `plugins:` list of a sweep's own `space.yaml`: its files and folders as the copies in
    `RESULTS/plugins/` (`plugins/my_models.py`, `plugins/echo/`)."""
    return [
        f"{PLUGIN_DIR}/{p.module}.py" if p.is_file else f"{PLUGIN_DIR}/{p.module}/" if p.is_folder else p.spec
        for p in plugins
    ]


def _folder_files(folder) -> dict[str, bytes]:
    """Relative path -> bytes of every file below a folder (a `Path` or a `Loc`), compiled and hidden files
    left out: what a copy of a package plugin holds."""
    if isinstance(folder, Path):
        found = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    else:
        found = {posixpath.relpath(p.path, folder.path): p for p in folder.rglob("*")}
    return {rel: loc.read_bytes() for rel, loc in sorted(found.items()) if _kept(rel) and not rel.endswith(".pyc")}


def localise(folder, specs: object) -> Path:
    """A folder on this machine holding the plugin files and package folders (all their files) a space on remote
    storage (`folder`, a `Loc`) lists: they are imported from there."""
    import tempfile

    local = Path(tempfile.mkdtemp(prefix="stitchsweep-plugins-"))
    for spec in specs if isinstance(specs, list) else ():
        if not isinstance(spec, str) or not spec.strip() or Path(spec).is_absolute():
            continue
        form = plugin_form(spec, folder)
        if form == FILE:
            target = local / spec
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((folder / spec).read_bytes())
        elif form == FOLDER:
            name = spec.rstrip("/")
            for rel, data in _folder_files(folder / name).items():
                target = local / name / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
    return local


def keep_plugins(sweep, sweep_dir) -> dict:
    """Copy `sweep`'s plugin files and package folders into `RESULTS/plugins/` and return its expanded space
    listing the copies: what `resume`, `status` and `report` import, whatever becomes of the originals."""
    if not sweep.plugins:
        return sweep.raw
    for p in sweep.plugins:
        if p.is_file:
            (sweep_dir.path / PLUGIN_DIR / f"{p.module}.py").write_bytes(p.path.read_bytes())
        elif p.is_folder:
            files = _folder_files(p.path)  # read first: the folder may be the copy itself (a kept space run again)
            copy = sweep_dir.path / PLUGIN_DIR / p.module
            copy.delete_tree()  # whole: a file the original no longer has is not kept
            for rel, data in files.items():
                (copy / rel).write_bytes(data)
    return {**sweep.raw, "plugins": recorded(sweep.plugins)}


def recorded_versions(sweep_dir) -> dict[str, str]:
    """Module -> version of the plugin copies a sweep's results folder holds (empty: none recorded); a package
    copy's version is also given under each of its modules' names, as `load_plugin` records it."""
    folder = sweep_dir.path / PLUGIN_DIR
    if not folder.exists():
        return {}
    versions = {q.name[:-3]: source_version(q.read_bytes()) for q in folder.files(".py")}
    for q in folder.glob("*"):
        if q.is_dir() and (q / "__init__.py").is_file():
            sources = package_sources(q)
            version = package_version(sources)
            versions.update({name: version for name in [q.name, *_submodules(q.name, sources)]})
    return versions
