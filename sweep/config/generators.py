"""Donor families, selections and pair generators: the parts of the space language that expand into plain
lists before a space is parsed (docs/search-spaces.md, "Families, selections and pair generators").

`expand_space(raw, spec_of)` returns the plain space (every family written out as donors, every selection as
a list of REFs, every generator as its pairs, no `tags`) and one line per generator for `plan`. A plain space
expands to itself, so a run's kept copy (the expanded form) plans to the same units as the space it came from.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
import string
from collections.abc import Callable
from typing import Any

import yaml

from sweep.config.errors import MISSING, SpecError
from sweep.config.fields import NAME_RE, Section, check_value

FAMILY_KEYS = {"vary", "name", "donor", "tags"}
GENERATORS = ("ordered", "unordered", "product", "zip", "diagonal")
PAIR_OPTIONS = ("self", "same", "differ")
TWO_SIDED = ("product", "zip")  # generators that take one selection per role
SHARED = "x-"  # a top-level field named x-... holds a block for YAML anchors (`<<: *name`), not part of the space


def _fill(template: Any, binding: dict, where: str) -> Any:
    """`template` with `{variable}` replaced from `binding`, in every string of it. A string that is exactly
    one placeholder keeps the value's type (`seed: "{seed}"` is an integer)."""
    if isinstance(template, dict):
        return {k: _fill(v, binding, f"{where}.{k}") for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, binding, f"{where}[{i}]") for i, v in enumerate(template)]
    if not isinstance(template, str):
        return template
    names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    unknown = [n for n in names if n not in binding]
    if unknown:
        raise SpecError(where, f"a pattern over the variables {sorted(binding)}", template, f"no {{{unknown[0]}}}")
    if len(names) == 1 and template == "{" + names[0] + "}":
        return binding[names[0]]
    try:
        return template.format_map(binding)
    except (ValueError, TypeError) as exc:
        raise SpecError(where, "a pattern of {variable} or {variable:format}", template, str(exc)) from None


def _items(value: Any, where: str) -> list[tuple[Any, str]]:
    """(item, its path) of a value that is one item or a list of them."""
    if isinstance(value, list):
        return [(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return [(value, where)]


def _bindings(vary: Any, where: str) -> list[dict]:
    """The variable bindings of a family's `vary`: the product of each mapping's lists (an item that is a
    mapping binds several variables at once), the union over a list of such mappings."""
    blocks = _items(vary, where)
    if not blocks:
        raise SpecError(where, "a mapping of variable -> list of values, or a list of such mappings", vary)
    out = []
    for block, bwhere in blocks:
        if not isinstance(block, dict) or not block:
            raise SpecError(bwhere, "a non-empty mapping of variable -> list of values", block)
        axes = []
        for var, values in block.items():
            if not isinstance(values, list) or not values:
                raise SpecError(f"{bwhere}.{var}", "a non-empty list of values", values)
            axes.append([v if isinstance(v, dict) else {var: v} for v in values])
        out += [{k: v for part in combo for k, v in part.items()} for combo in itertools.product(*axes)]
    return out


def _family(fname: str, raw: dict, where: str) -> list[tuple[str, dict, dict]]:
    """[(donor name, donor mapping, tags)] of one family entry."""
    s = Section(raw, where, FAMILY_KEYS)
    pattern = s.get("name", "string")
    template = s.get("donor", "mapping")
    tags = s.get("tags", "mapping", {})
    members = []
    for binding in _bindings(raw["vary"], f"{where}.vary"):
        name = _fill(pattern, binding, f"{where}.name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise SpecError(f"{where}.name", "a pattern giving names of letters, digits, '_', '-' or '.'", name)
        own = {"family": fname, **binding, **_fill(tags, binding, f"{where}.tags")}
        members.append((name, _fill(template, binding, f"{where}.donor"), own))
    return members


def _own_tags(raw: Any, where: str) -> dict:
    tags = raw.get("tags", {}) if isinstance(raw, dict) else {}
    if not isinstance(tags, dict) or any(isinstance(v, (dict, list)) for v in tags.values()):
        raise SpecError(f"{where}.tags", "a mapping of tag -> value (a string or a number)", tags)
    return tags


def expand_donors(raw: Any) -> tuple[Any, dict, list[str], dict[str, str]]:
    """(the donors mapping with families written out and tags removed, name -> tags, plan lines, the name of
    each family member -> its family's key)."""
    if not isinstance(raw, dict):
        return raw, {}, [], {}
    donors: dict[str, Any] = {}
    tags: dict[str, dict] = {}
    origin: dict[str, str] = {}
    families: dict[str, str] = {}
    lines = []
    for name, draw in raw.items():
        where = f"donors.{name}"
        if isinstance(draw, dict) and "vary" in draw:
            members = _family(name, draw, where)
            families |= {member: name for member, _, _ in members}
            lines.append(f"{where}: a family of {len(members)} donors over {_vary_names(draw['vary'])}")
        else:
            plain = {k: v for k, v in draw.items() if k != "tags"} if isinstance(draw, dict) else draw
            members = [(name, plain, _own_tags(draw, where))]
        for member, mraw, mtags in members:
            if member in donors:
                raise SpecError(where, "donor names that no other donor or family member has", member,
                                f"{origin[member]} has it too: change the name pattern")  # fmt: skip
            donors[member], tags[member], origin[member] = mraw, mtags, where
    return donors, tags, lines, families


def in_family(err: SpecError, member: str, families: dict[str, str]) -> SpecError:
    """`err` about donor `member` named at its family's position in the file (the generated name is in no
    file): donors.net_s0.arch -> donors.net.donor.arch (family 'net', generated donor 'net_s0')."""
    family, own = families.get(member), f"donors.{member}"
    if family is None or not (err.field == own or err.field.startswith((own + ".", own + "["))):
        return err
    rest = err.field[len(own) :]
    field = f"donors.{family}{'.donor' + rest if rest else ''} (family {family!r}, generated donor {member!r})"
    return SpecError(field, err.expected, err.found, err.hint)


def _vary_names(vary: Any) -> str:
    blocks = vary if isinstance(vary, list) else [vary]
    return " + ".join(" x ".join(b) for b in blocks if isinstance(b, dict))


@dataclasses.dataclass
class Pool:
    """The space's donors with their tags, for selections: `spec_of(name)` parses one (for selections by a
    donor field such as `arch`, which a checkpoint's donor does not write)."""

    donors: dict
    tags: dict
    spec_of: Callable[[str], Any]

    def ref(self, name: str) -> str:
        from sweep.config.donors import source_of

        return f"{source_of(self.donors[name]).name}:{name}"

    def knows(self, key: str) -> bool:
        return _is_field(key) or any(key in t for t in self.tags.values())

    def value(self, name: str, key: str) -> Any:
        """A donor's tag `key`, else its field `key` (None: neither)."""
        if key in self.tags[name]:
            return self.tags[name][key]
        if not _is_field(key):
            return None
        spec = self.spec_of(name)
        return spec.data.dataset if key == "dataset" else getattr(spec, key)

    def select(self, sel: Any, where: str) -> list[str]:
        """The REFs a selection names: a REF, a list of REFs and selections, or one selection mapping."""
        items = _items(sel, where)
        if not items:
            raise SpecError(where, "a donor REF, a selection mapping or a non-empty list of them", sel)
        refs = []
        for item, iwhere in items:
            if isinstance(item, dict):
                refs += self._match(item, iwhere)
            elif isinstance(item, str):
                refs.append(item)
            else:
                raise SpecError(iwhere, "a donor REF or a selection mapping ({arch: ..., level: ...})", item)
        return list(dict.fromkeys(refs))

    def _match(self, sel: dict, where: str) -> list[str]:
        if not sel:
            raise SpecError(where, "a selection with at least one condition (name, family, a tag or a field)", sel)
        names = list(self.donors)
        for key, want in sel.items():
            wants = want if isinstance(want, list) else [want]
            if key == "name":
                names = [n for n in names if any(fnmatch.fnmatchcase(n, str(w)) for w in wants)]
            elif not self.knows(key):
                raise SpecError(f"{where}.{key}", "a tag some donor has, or a donor field (arch, eps, ...)", key,
                                f"tags: {sorted({t for tags in self.tags.values() for t in tags})}")  # fmt: skip
            else:
                names = [n for n in names if self.value(n, key) in wants]
        if not names:
            raise SpecError(where, "a selection that matches at least one donor", sel)
        return [self.ref(n) for n in names]

    def pairs(self, entry: Any, roles: tuple[str, str], where: str) -> tuple[list, str | None]:
        """The pair entries of one item of a `pairs` list: itself when it is explicit, else its generator's
        pairs (and a plan line)."""
        gens = [g for g in GENERATORS if isinstance(entry, dict) and g in entry]
        if not gens:
            return [entry], None
        if len(gens) > 1:
            raise SpecError(where, "one generator per entry", gens)
        g = gens[0]
        extra = {k: v for k, v in entry.items() if k not in (g, *PAIR_OPTIONS)}
        if set(roles) & set(extra):
            raise SpecError(where, f"a generator ({g}) or explicit {'/'.join(roles)}, not both", sorted(entry))
        cand = self._generate(g, entry, roles, where)
        for key in ("same", "differ"):
            for k in _keys(entry.get(key, []), f"{where}.{key}"):
                if not self.knows(k):
                    raise SpecError(f"{where}.{key}", "a tag some donor has, or a donor field", k)
                equal = key == "same"
                cand = [(x, y) for x, y in cand if (self._of(x, k) == self._of(y, k)) == equal]
        if not cand:
            raise SpecError(where, "a generator that yields at least one pair", _brief(entry, g))
        line = f"{where}: {_brief(entry, g)} -> {len(cand)} pairs"
        return [{roles[0]: x, roles[1]: y, **extra} for x, y in cand], line

    def _of(self, ref: str, key: str) -> Any:
        return self.value(ref.partition(":")[2], key)

    def _generate(self, g: str, entry: dict, roles: tuple[str, str], where: str) -> list[tuple[str, str]]:
        if "self" in entry and g in ("zip", "diagonal"):
            raise SpecError(f"{where}.self", f"no `self` with {g}", entry["self"])
        with_self = check_value(entry.get("self", g == "product"), f"{where}.self", "bool")
        if g in TWO_SIDED:
            sides = Section(entry[g], f"{where}.{g}", set(roles))
            for r in roles:
                if r not in sides.raw:
                    raise SpecError(f"{where}.{g}.{r}", "a selection (the field is required)", MISSING)
            xs, ys = (self.select(sides.raw[r], f"{where}.{g}.{r}") for r in roles)
        else:
            xs = ys = self.select(entry[g], f"{where}.{g}")
        if g == "zip":
            if len(xs) != len(ys):
                raise SpecError(f"{where}.zip", "two selections of one length", f"{len(xs)} and {len(ys)} donors")
            return list(zip(xs, ys))
        if g == "diagonal":
            return [(x, x) for x in xs]
        if g == "unordered":
            return [(x, y) for i, x in enumerate(xs) for y in xs[i if with_self else i + 1 :]]
        return [(x, y) for x in xs for y in ys if with_self or x != y]


def _is_field(key: str) -> bool:
    """A donor field a selection may name (`dataset`: the data it trained on)."""
    from sweep.config.donors import DonorSpec

    return key == "dataset" or key in {f.name for f in dataclasses.fields(DonorSpec)} - {"name", "data"}


def _keys(value: Any, where: str) -> list[str]:
    keys = value if isinstance(value, list) else [value]
    if not all(isinstance(k, str) and k for k in keys):
        raise SpecError(where, "a tag or donor field name, or a list of them", value)
    return keys


def _brief(entry: dict, g: str) -> str:
    rest = ", ".join(f"{k} {entry[k]}" for k in PAIR_OPTIONS if k in entry)
    return f"{g} of {entry[g]}" + (f", {rest}" if rest else "")


def _entries(value: Any) -> tuple[list, bool]:
    return (value, True) if isinstance(value, list) else ([value], False)


def expand_space(raw: dict, spec_of: Callable[[str, Any], Any]) -> tuple[dict, list[str], dict[str, str]]:
    """(the plain space, plan lines, family member -> family): families, selections and pair generators
    written out. `spec_of(name, donor mapping)` parses a donor (for selections by field)."""
    from sweep.registry import KINDS

    donors, tags, lines, families = expand_donors(raw.get("donors"))
    out = {k: v for k, v in raw.items() if not str(k).startswith(SHARED)}  # shared blocks: anchors only
    out |= {"donors": donors} if "donors" in raw else {}
    if not isinstance(donors, dict):
        return out, lines, families
    specs: dict[str, Any] = {}

    def spec(name: str) -> Any:
        try:
            return specs[name] if name in specs else specs.setdefault(name, spec_of(name, donors[name]))
        except SpecError as err:
            raise in_family(err, name, families) from None

    pool = Pool(donors, tags, spec)
    for kind in KINDS.values():
        if kind.section not in raw or not kind.options:
            continue
        entries, listed = _entries(raw[kind.section])
        new = []
        for i, entry in enumerate(entries):
            where = f"{kind.section}[{i}]" if listed else kind.section
            new.append(_expand_entry(entry, kind.options, pool, where, lines))
        out[kind.section] = new if listed else new[0]
    return out, lines, families


def _expand_entry(entry: Any, options: dict, pool: Pool, where: str, lines: list[str]) -> Any:
    if not isinstance(entry, dict):
        return entry  # the section's parser says what is wrong
    entry = dict(entry)
    for opt in options.values():
        value = entry.get(opt.key)
        if opt.refs and value is not None and not _plain_refs(value):
            entry[opt.key] = pool.select(value, f"{where}.{opt.key}")
            lines.append(f"{where}.{opt.key}: {len(entry[opt.key])} donors")
        if opt.pairs and isinstance(value, list):
            pairs = []
            for j, item in enumerate(value):
                got, line = pool.pairs(item, opt.pairs, f"{where}.{opt.key}[{j}]")
                pairs += got
                lines += [line] if line else []
            entry[opt.key] = pairs
    return entry


def _plain_refs(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


class _Dumper(yaml.SafeDumper):
    """Block style, except a mapping of plain values (a pair, a small donor) on one line."""


def _mapping(dumper: yaml.SafeDumper, data: dict) -> yaml.Node:
    flow = bool(data) and all(not isinstance(v, (dict, list)) for v in data.values())
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow)


def _sequence(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    flow = all(not isinstance(v, (dict, list)) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(dict, _mapping)
_Dumper.add_representer(list, _sequence)


def dump_space(raw: dict) -> str:
    """The expanded space as YAML that reads back to the same mapping (`plan --expand`)."""
    return yaml.dump(raw, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
