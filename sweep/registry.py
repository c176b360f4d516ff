"""One registry helper for everything a search space names: architectures, datasets, augmentations,
objectives, stitchers, similarity indices, attacks, threat models, optimisers and schedules, donor sources,
donor training methods and kinds of work.

A `Registry` maps a name to an entry (a dataclass carrying the entry's metadata, or a function). It refuses a
name registered twice, and an unknown name gets the registered names and a did-you-mean suggestion, as
torchvision's feature extraction does. It imports nothing heavy, so any layer may hold one.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


ALIASES: dict[str, list[str]] = {}  # another name a user may write (`_plain`) -> registered names (`Registry.alias`)


# Code versions: an entry registered by a user's plugin module carries that module's version (a hash
# of its source, or its PLUGIN_VERSION string), or the `version` its register call passed. Shipped entries have
# none, so the ids of the units that use only them are the ids they always had.
ORIGINS: dict[tuple[str, str], str] = {}  # (registry kind, name) -> the module outside `sweep` that registered it
EXPLICIT: dict[tuple[str, str], str] = {}  # (registry kind, name) -> the version its register call passed
PLUGIN_VERSIONS: dict[str, str] = {}  # a loaded plugin's module name -> its version (`sweep.config.plugins`)


def _registering_module() -> str | None:
    """The first module outside `sweep` on the stack: the user's module whose import (or call) registers an
    entry. A shipped entry's declaration is reached through importlib's frames, never a plugin's."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith(("importlib", "_frozen_importlib")):
            return None  # a module's import (of a shipped declaration) reached from elsewhere
        if name != "sweep" and not name.startswith("sweep."):
            return name
        frame = frame.f_back
    return None


def entry_version(kind: str, name: str) -> str | None:
    """The version of a registration: explicit, else its plugin module's; None for shipped entries."""
    key = (kind, name)
    return EXPLICIT.get(key) or PLUGIN_VERSIONS.get(ORIGINS.get(key, ""))


def _strings(obj, out: set[str]) -> set[str]:
    if isinstance(obj, str):
        out.add(obj)
    elif isinstance(obj, Mapping):
        for v in obj.values():
            _strings(v, out)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            _strings(v, out)
    return out


def versions_of(fields: Mapping) -> dict[str, str]:
    """'kind:name' -> version for every versioned registration a unit's hashed fields name (empty when none:
    the ids of units that use only shipped entries do not change)."""
    if not PLUGIN_VERSIONS and not EXPLICIT:
        return {}
    named = _strings(fields, set())
    found = {f"{k}:{n}": entry_version(k, n) for (k, n) in {*ORIGINS, *EXPLICIT} if n in named}
    return {k: v for k, v in sorted(found.items()) if v}


def _plain(name: str) -> str:
    """`name` without case, '_', '-' or spaces: 'FashionMNIST' and 'fashion-mnist' read as 'fashion_mnist'."""
    return "".join(c for c in name.lower() if c not in "_- ")


def did_you_mean(name: object, names) -> str:
    """'did you mean X?' for the name `name` most likely meant, or '' when none is close: an alias of a name
    ('fmnist' for 'fashion_mnist'), the same name written otherwise ('FashionMNIST'), a close spelling, or the
    names that contain it ('tiny': 'resnet_tiny', 'vit_tiny_cpu')."""
    if not isinstance(name, str) or not name:
        return ""
    names = [str(n) for n in names]
    plain = {_plain(n): n for n in names}
    meant = next((n for n in ALIASES.get(_plain(name), ()) if n in plain.values()), plain.get(_plain(name)))
    if meant in names and meant != name:
        return f"did you mean {meant!r}?"
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    within = sorted((n for n in names if len(_plain(name)) >= 3 and _plain(name) in _plain(n)), key=len)[:3]
    return f"did you mean {' or '.join(map(repr, within))}?" if within else ""


class UnknownName(KeyError, ValueError):
    """A name that is not registered (a KeyError for mappings, a ValueError for callers)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T], Generic[T]):
    """Name -> entry. Iterating gives the names in registration order; `sorted(registry)` lists them."""

    def __init__(self, kind: str, populate: str | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        # The module whose import registers the entries: imported on first use, so that the search-space
        # layer can validate names without importing torch when it is imported itself.
        self._populate = populate
        # prefix -> "package.module:function": a name `prefix...` not registered is made by that function on first
        # lookup (`torchvision:resnet50`), which raises `UnknownName` for a name it does not know
        self._prefixes: dict[str, str] = {}

    def _load(self) -> None:
        if self._populate is not None:
            module, self._populate = self._populate, None
            importlib.import_module(module)

    def add(self, name: str, entry: T, version: str | None = None) -> T:
        """Register `entry` under `name` (a name may be registered once). `version`: a string to bump when the
        entry's code changes what it computes (default: its plugin module's version)."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        origin = _registering_module()
        if origin is not None:
            ORIGINS[(self.kind, name)] = origin
        if version is not None:
            EXPLICIT[(self.kind, name)] = str(version)
        return entry

    def alias(self, name: str, *aliases: str) -> None:
        """Other names users write for `name` (`did_you_mean` suggests `name` for them; they are not valid)."""
        for other in aliases:
            ALIASES.setdefault(_plain(other), []).append(name)

    def register(
        self, name: str, make: Callable[[Callable], T] | None = None, version: str | None = None
    ) -> Callable[[Callable], Callable]:
        """Decorator: register the function (or `make(function)`, an entry built around it) under `name`."""

        def wrap(fn: Callable) -> Callable:
            self.add(name, make(fn) if make is not None else fn, version)
            return fn

        return wrap

    def prefix(self, prefix: str, make: str) -> None:
        """Names starting with `prefix` are made on first lookup by `make` ("package.module:function")."""
        self._prefixes[prefix] = make

    def get_entry(self, name: str) -> T:
        """The entry of `name`; an unknown name raises `UnknownName` naming the registered ones."""
        self._load()
        made = next((make for p, make in self._prefixes.items() if isinstance(name, str) and name.startswith(p)), None)
        if name not in self._entries and made is not None:
            self._entries[name] = resolve(made)(name)
        if name not in self._entries:
            hint = did_you_mean(name, self._entries)
            raise UnknownName(
                f"unknown {self.kind} {name!r}; registered: {sorted(self._entries)}" + (f" ({hint})" if hint else "")
            )
        return self._entries[name]

    def names(self) -> list[str]:
        self._load()
        return list(self._entries)

    def remove(self, name: str) -> None:
        """Unregister `name` (for tests that register a temporary entry)."""
        self._entries.pop(name)
        ORIGINS.pop((self.kind, name), None)
        EXPLICIT.pop((self.kind, name), None)

    def __getitem__(self, name: str) -> T:
        return self.get_entry(name)

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(self._entries)

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {sorted(self._entries)})"


LIBRARIES = ("torchvision", "timm")  # the libraries whose networks a donor `arch` names (`timm:convnext_tiny`)


def library_version(arch: object) -> str | None:
    """'<library> <version>' of a library network's arch (`torchvision:resnet50`), None for any other: part of
    its donor key and its activations' cache key, so an upgrade of the library is other weights."""
    library, sep, _ = arch.partition(":") if isinstance(arch, str) else ("", "", "")
    if not sep or library not in LIBRARIES:
        return None
    from importlib.metadata import version

    return f"{library} {version(library)}"


def lazy(target: str) -> Callable:
    """A function of a higher layer ('package.module:name'), imported when first called: how the search-space
    layer reaches what only a loaded library can answer (RobustBench's model list) without importing it."""
    module, _, name = target.partition(":")

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = name
    call.target = target  # what it names (tests check that every declared one resolves)
    return call


def resolve(target: Callable | str) -> Callable:
    """A declared function: the callable itself, or the one "package.module:name" names (imported now)."""
    if callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


# The registries. Each is filled by the module named here, imported the first time the registry is read.
ARCHITECTURES: Registry = Registry("architecture", populate="sweep.models.declared")
DATASETS: Registry = Registry("dataset", populate="sweep.data.declared")
AUGMENTATIONS: Registry = Registry("augmentation", populate="sweep.data.declared")
TRAINING_METHODS: Registry = Registry("donor training method", populate="sweep.train.declared")
OBJECTIVES: Registry = Registry("objective", populate="sweep.stitching.declared")
STITCHERS: Registry = Registry("stitcher", populate="sweep.stitching.declared")
INDICES: Registry = Registry("similarity index", populate="sweep.measures.indices")
ATTACKS: Registry = Registry("attack", populate="sweep.train.declared")
THREATS: Registry = Registry("threat model", populate="sweep.train.declared")
OPTIMIZERS: Registry = Registry("optimizer", populate="sweep.train.declared")
SCHEDULES: Registry = Registry("learning-rate schedule", populate="sweep.train.declared")
KINDS: Registry = Registry("kind of work", populate="sweep.kinds")
DONOR_SOURCES: Registry = Registry("donor source", populate="sweep.config.sources")
