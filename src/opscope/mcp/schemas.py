"""JSON Schema pieces of the tools: strict inputs, published outputs.

Inputs are closed (``additionalProperties: false``), sort keys and severities are enums and
limits have ranges, so a client can check a call before sending it and the server
(:mod:`opscope.mcp.registry`) refuses the same things with a message saying what to pass.
Outputs reuse the document types of :mod:`opscope.documents` (the shapes of ``report.json``'s
sections) by reference: :func:`shallow` gives a type's fields with their types and
descriptions, and names the types nested in them by title; the ``schema`` tool (and
``opscope schema``) gives any of them in full.  So ``tools/list`` carries each definition at
most once per tool and none in depth (it is paid for in every session).  Output schemas are
looser than the documents, never stricter, and stay open to added keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, is_typeddict

JsonSchema = dict[str, Any]

TRACE: JsonSchema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "description": "handle (t1...); default: the last opened",
}
OFFSET: JsonSchema = {
    "type": "integer",
    "minimum": 0,
    "maximum": 1_000_000_000,
    "default": 0,
    "description": "where the page starts: a result's next_offset",
}
NAME_FILTER: JsonSchema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "keep rows whose name contains this text (case-insensitive)",
}


def limit(default: int, maximum: int, what: str = "rows") -> JsonSchema:
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": maximum,
        "default": default,
        "description": f"{what} to return (1-{maximum})",
    }


def enum(values: Sequence[str], description: str) -> JsonSchema:
    return {"type": "string", "enum": list(values), "description": description}


def args(properties: Mapping[str, JsonSchema], required: Sequence[str] = ()) -> JsonSchema:
    """A closed input schema."""
    out: JsonSchema = {"type": "object", "properties": dict(properties)}
    if required:
        out["required"] = list(required)
    out["additionalProperties"] = False
    return out


def result(
    properties: Mapping[str, JsonSchema],
    required: Sequence[str] = (),
    *,
    base: JsonSchema | None = None,
) -> JsonSchema:
    """An output schema: every result names its ``trace`` (the handle answered) and may say
    it was ``truncated`` (more exists than is shown) and which lists were ``trimmed`` to fit
    the size cap (the server's instructions say so once, not each schema); ``base``: a
    document type the result also is (a finding...)."""
    props: dict[str, JsonSchema] = {
        "trace": {"type": "string"},
        **properties,
        "truncated": {"type": "boolean"},
        "trimmed": {"type": "array", "items": {"type": "string"}},
    }
    out: JsonSchema = {"type": "object", "properties": props, "required": ["trace", *required]}
    if base is not None:
        out["allOf"] = [base]
    return out


def page(row: JsonSchema, extra: Mapping[str, JsonSchema] | None = None) -> JsonSchema:
    """The output schema of a page of rows (see :mod:`opscope.service.queries`): ``total``
    rows pass the filter, ``next_offset`` is ``offset`` plus the rows returned, null on the
    last page (the server's instructions say so once)."""
    return result(
        {
            **(extra or {}),
            "rows": {"type": "array", "items": row},
            "total": {"type": "integer"},
            "offset": {"type": "integer"},
            "next_offset": {"type": ["integer", "null"]},
        },
        ["rows", "total", "offset", "next_offset", "truncated"],
    )


@cache
def _documents_schema(name: str) -> JsonSchema:
    from opscope import documents

    schema: JsonSchema = documents.schema_of(getattr(documents, name))
    return schema


def doc(name: str) -> JsonSchema:
    """The schema of the document type ``name`` of :mod:`opscope.documents` (``OpRow``,
    ``Finding``...), self-contained (its ``$defs`` inside)."""
    return _documents_schema(name)


# too large for one answer: their parts are named
_WHOLE_REPORTS = ("Report", "RankReport")


@cache
def type_schemas() -> dict[str, JsonSchema]:
    """Every document type a tool's output names, by name, each self-contained: the types of
    :mod:`opscope.documents` (the whole reports aside: ask for their parts) and the types
    nested in them (``DiffSide``...), for the ``schema`` tool."""
    from opscope import documents

    out: dict[str, JsonSchema] = {}
    nested: dict[str, JsonSchema] = {}
    for name in documents.__all__:
        tp = getattr(documents, name)
        if not is_typeddict(tp):
            continue
        full = _documents_schema(name)
        defs = full.get("$defs") or {}
        for inner in defs:  # a nested type: its own schema, with the definitions it uses
            if inner not in nested:
                used = _referenced(defs[inner], defs)
                nested[inner] = {**defs[inner], **({"$defs": used} if used else {})}
        if name not in _WHOLE_REPORTS:
            out[name] = full
    for name, schema in nested.items():
        out.setdefault(name, schema)
    return dict(sorted(out.items()))


def _referenced(node: Any, defs: Mapping[str, JsonSchema]) -> dict[str, JsonSchema]:
    """The definitions ``node`` refers to, directly or through one another."""
    out: dict[str, JsonSchema] = {}
    todo = [node]
    while todo:
        cur = todo.pop()
        if isinstance(cur, dict):
            ref = cur.get("$ref")
            if isinstance(ref, str):
                name = ref.rsplit("/", 1)[-1]
                if name not in out and name in defs:
                    out[name] = defs[name]
                    todo.append(defs[name])
            todo.extend(cur.values())
        elif isinstance(cur, list):
            todo.extend(cur)
    return dict(sorted(out.items()))


def _nested(node: Any, defs: Mapping[str, JsonSchema]) -> Any:
    """A property's schema with the types it refers to named, not given: a reference
    becomes ``{"type": ..., "title": NAME}``, what is inline keeps its types, enums, items
    and (for maps) value type; descriptions and nested properties go."""
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name) or {}
        out: JsonSchema = {"title": name}
        if isinstance(target.get("type"), str | list):
            out["type"] = target["type"]
        return out
    keep: JsonSchema = {}
    for key in ("type", "enum", "const"):
        if key in node:
            keep[key] = node[key]
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = [_nested(v, defs) for v in node[key]]
            kinds = [o.get("type") for o in options]
            pairs = zip(kinds, options, strict=True)
            if all(isinstance(k, str) and set(o) == {"type"} for k, o in pairs):
                keep["type"] = kinds  # [number, null], not anyOf of two schemas
            else:
                keep[key] = options
    if isinstance(node.get("items"), dict):
        keep["items"] = _nested(node["items"], defs)
    if isinstance(node.get("additionalProperties"), dict):
        keep["additionalProperties"] = _nested(node["additionalProperties"], defs)
    return keep


# a field's description in the tool list at most (the type's schema has it in full)
_SHORT = 110


def _first_sentence(text: str) -> str:
    """A field's description as the tool list shows it: its first sentence, and of a long
    one its first clause (up to the first ``; ``); the full text is in the type's schema."""
    plain = text.replace("``", "")
    cut = plain.find(". ")
    first = plain if cut < 0 else plain[: cut + 1]
    clause = first.find("; ")
    if len(first) > _SHORT and clause > 0:
        first = first[:clause] + "."
    return first


def shallow(name: str, *, described: bool = True) -> JsonSchema:
    """The document type ``name`` one level deep: its fields with their types (and, when
    ``described``, their descriptions), the types nested in them by title; its description
    says where the full schema is.  Valid for every value the full schema accepts."""
    full = doc(name)
    defs: Mapping[str, JsonSchema] = full.get("$defs") or {}
    out: JsonSchema = {"type": "object", "title": name}
    summary = str(full.get("description") or "").replace("``", "").split(". ")[0].rstrip(".")
    out["description"] = (f"{summary}. " if summary else "") + f'In full: schema(name="{name}").'
    props: JsonSchema = {}
    for key, sub in (full.get("properties") or {}).items():
        field = _nested(sub, defs)
        text = sub.get("description") if isinstance(sub, dict) else None
        if described and isinstance(text, str):
            field["description"] = _first_sentence(text)
        props[key] = field
    out["properties"] = props
    return out


def titled(name: str) -> JsonSchema:
    """The document type ``name`` by title alone (its fields are in ``schema(name=...)``):
    for a type nested in a tool's output, which its output schema does not spell out."""
    out = shallow(name, described=False)
    del out["properties"]
    return out


ANY_OBJECT: JsonSchema = {"type": "object"}
