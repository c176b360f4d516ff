"""The JSON Schema of the search-space language (`stitchsweep schema`), generated from the same `Option`
declarations the validator reads: the sections of the registered kinds of work, the registered donor sources
(a plugin's entry appears once registered), families, selections and pair generators. An editor with the YAML
language server completes field names and flags mistakes with it (docs/search-spaces.md, "Editor support").

The schema checks shapes, names, types, choices and bounds; what depends on the data or on other fields
(a stitch point of this architecture, K >= the stitcher's inputs) is the validator's alone (`plan`)."""

from __future__ import annotations

from typing import Any

from sweep.config.fields import NAME_RE, REQUIRED, Option
from sweep.config.generators import FAMILY_KEYS, GENERATORS
from sweep.registry import LIBRARIES

DRAFT = "https://json-schema.org/draft/2020-12/schema"
TYPES = {"integer": "integer", "number": "number", "string": "string", "bool": "boolean", "mapping": "object"}

SCALAR = {"type": ["string", "number", "boolean"]}
SELECTION = {
    "type": "object",
    "minProperties": 1,
    "description": "donors whose tags or fields (arch, training, eps, seed, dataset, ...) have these values "
    "(a value or a list of values); name: a glob on donor names; family: a family's name",
    "additionalProperties": {"anyOf": [SCALAR, {"type": "array", "items": SCALAR, "minItems": 1}]},
}
REF = {"type": "string", "pattern": r"^[a-z_]+:[A-Za-z0-9][A-Za-z0-9_.\-]*$", "description": "SOURCE:NAME"}
LIBRARY_ARCH = {  # a library network by name (`sweep.models.library`): the model name is checked by `plan`
    "type": "string",
    "pattern": rf"^({'|'.join(LIBRARIES)}):[A-Za-z0-9][A-Za-z0-9_.\-]*$",
    "description": "a library network: torchvision:<name> or timm:<name>",
}
REFS = {
    "description": "donor REFs, or selections",
    "anyOf": [
        REF,
        SELECTION,
        {"type": "array", "minItems": 1, "items": {"anyOf": [REF, SELECTION]}},
    ],
}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def option_schema(opt: Option) -> dict:
    """One field: its type, choices, bounds, default and the docs' line."""
    base: dict[str, Any] = {"type": TYPES[opt.kind]}
    if opt.kind == "string":
        base["minLength"] = 1
    if opt.choices is not None:
        base["enum"] = list(opt.names())
        if opt.key == "arch":
            base = {"anyOf": [base, LIBRARY_ARCH]}
    if opt.low is not None:
        base["minimum"] = opt.low
    if opt.high is not None:
        base["maximum"] = opt.high
    if opt.fields:
        base = section_schema(opt.fields)
    if opt.many:
        base = {"type": "array", "items": base, **({} if opt.default == () else {"minItems": 1})}
    elif opt.or_list:
        base = {"anyOf": [base, {"type": "array", "items": base, "minItems": 1}]}
    if opt.refs:
        base = REFS
    if opt.pairs:
        base = _pairs_schema(opt.pairs)
    if opt.nullable or (opt.default is None and not opt.required):
        base = {"anyOf": [base, {"type": "null"}]}
    out = dict(base)
    if opt.doc:
        out["description"] = opt.doc
    if not opt.required and not opt.derived and opt.default is not REQUIRED:
        out["default"] = _plain(opt.default)
    return out


def section_schema(options: dict, extra: dict | None = None) -> dict:
    """A mapping with exactly these fields (`extra`: fields the language adds, such as a donor's `tags`)."""
    props = {key: option_schema(opt) for key, opt in options.items()}
    out = {
        "type": "object",
        "properties": {**props, **(extra or {})},
        "required": [key for key, opt in options.items() if opt.required and not opt.only],
        "additionalProperties": False,
    }
    conditions = [
        {
            "if": _when(options, *opt.only),
            "then": {"required": [key]} if opt.required else {},
            "else": {"not": {"required": [key]}},
        }
        for key, opt in options.items()
        if opt.only
    ]
    return out | ({"allOf": conditions} if conditions else {})


def _when(options: dict, field: str, values) -> dict:
    """The condition `field` in `values` (one value or a tuple of them); a field left out holds its default."""
    values = list(values) if isinstance(values, tuple) else [values]
    condition: dict[str, Any] = {"properties": {field: {"enum": values}}}
    if options[field].default not in values:
        condition["required"] = [field]
    return condition


def _pairs_schema(roles: tuple[str, str]) -> dict:
    explicit = {"type": "object", "required": list(roles), "properties": {r: REF for r in roles}}
    keys = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    generator = {
        "type": "object",
        "description": "a pair generator: ordered | unordered | diagonal (of one selection), product | zip "
        f"(a selection per side: {roles[0]}, {roles[1]}); self, same, differ; any other key goes into every pair",
        "minProperties": 1,
        "properties": {
            **{g: REFS for g in ("ordered", "unordered", "diagonal")},
            **{
                g: {"type": "object", "properties": {r: REFS for r in roles}, "required": list(roles)}
                for g in ("product", "zip")
            },  # fmt: skip
            "self": {"type": "boolean", "description": "also (x, x) pairs"},
            "same": {"anyOf": [{"type": "string"}, keys], "description": "tags or fields both donors share"},
            "differ": {"anyOf": [{"type": "string"}, keys], "description": "tags or fields the two differ in"},
        },
        "oneOf": [{"required": [g]} for g in GENERATORS],
    }
    return {"type": "array", "minItems": 1, "items": {"anyOf": [explicit, generator]}}


TAGS = {"type": "object", "additionalProperties": SCALAR, "description": "labels selections can name"}


def _donor_schema() -> dict:
    from sweep.registry import DONOR_SOURCES

    forms = []
    for source in DONOR_SOURCES.values():
        if source.options is None:
            continue  # a plugin source without declared fields: accepted by the validator, not described here
        form = section_schema(source.options, {"tags": TAGS})
        if source.marker:
            form["required"] = sorted({*form["required"], source.marker})
        else:  # the default source: no other source's marker
            markers = [s.marker for s in DONOR_SOURCES.values() if s.marker]
            form["not"] = {"anyOf": [{"required": [m]} for m in markers]}
        forms.append(form)
    family = {
        "type": "object",
        "description": "a family: one donor per binding of `vary` (a mapping of lists, their product; a list of "
        "such mappings, their union), named by `name`, made from the `donor` template ({variable} patterns)",
        "required": ["vary", "name", "donor"],
        "additionalProperties": False,
        "properties": {
            "vary": {"anyOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}, "minItems": 1}]},
            "name": {"type": "string", "minLength": 1},
            "donor": {"type": "object"},
            "tags": {"type": "object"},
        },
    }
    assert set(family["properties"]) == FAMILY_KEYS
    return {"anyOf": [family, *forms]}


def space_schema() -> dict:
    """The whole search space."""
    from sweep.config.data import OPTIONS as DATA_OPTIONS
    from sweep.config.data import SOURCE_OPTIONS
    from sweep.config.evaluation import OPTIONS as EVALUATION_OPTIONS
    from sweep.config.space import RESOURCE_OPTIONS
    from sweep.registry import KINDS

    files = {"type": "string", "minLength": 1}
    props: dict[str, Any] = {
        "include": {
            "description": "files whose fields this one extends (relative to it)",
            "anyOf": [files, {"type": "array", "items": files, "minItems": 1}],
        },
        "plugins": {
            "description": "modules of your own imported first: .py files or package folders (relative to this one), or"
            " module names",
            "type": "array",
            "items": files,
        },
        "name": {"type": "string", "pattern": NAME_RE.pattern, "description": "names the results directory"},
        "data": section_schema(DATA_OPTIONS | SOURCE_OPTIONS),
        "donors": {"type": "object", "minProperties": 1, "additionalProperties": _donor_schema()},
        "evaluation": section_schema(EVALUATION_OPTIONS),
        "resources": section_schema(RESOURCE_OPTIONS),
    }
    for kind in KINDS.values():
        if kind.section and kind.options:
            entry = section_schema(kind.options)
            props[kind.section] = {"anyOf": [entry, {"type": "array", "items": entry, "minItems": 1}]}
    return {
        "$schema": DRAFT,
        "title": "stitchsweep search space",
        "type": "object",
        "properties": props,
        "patternProperties": {"^x-": {"description": "a block for YAML anchors, not part of the space"}},
        # a space names these, or includes a file that does (a file only meant to be included need not)
        "anyOf": [{"required": ["include"]}, {"required": ["name", "data", "donors"]}],
        "additionalProperties": False,
    }
