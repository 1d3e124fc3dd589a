"""JSON Schema pieces of the tools: strict inputs, published outputs.

Inputs are closed (``additionalProperties: false``), sort keys and severities are enums and
limits have ranges, so a client can check a call before sending it and the server
(:mod:`opscope.mcp.registry`) refuses the same things with a message saying what to pass.
Outputs reuse the document types of :mod:`opscope.documents` (the shapes of ``report.json``'s
sections) through :func:`doc`, and stay open to added keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

JsonSchema = dict[str, Any]

TRACE: JsonSchema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "description": "the handle open_trace returned (t1, t2, ...); default: the last opened",
}
OFFSET: JsonSchema = {
    "type": "integer",
    "minimum": 0,
    "maximum": 1_000_000_000,
    "default": 0,
    "description": "rows to skip (a result's next_offset)",
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
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


def result(
    properties: Mapping[str, JsonSchema],
    required: Sequence[str] = (),
    *,
    base: JsonSchema | None = None,
) -> JsonSchema:
    """An output schema: every result names its ``trace`` and may say it was ``truncated``
    (and which lists were ``trimmed``) to fit the size cap; ``base``: a document type the
    result also is (a finding, a chain...)."""
    props: dict[str, JsonSchema] = {
        "trace": {"type": "string", "description": "the handle of the trace answered"},
        **properties,
        "truncated": {"type": "boolean", "description": "more exists than is shown"},
        "trimmed": {
            "type": "array",
            "items": {"type": "string"},
            "description": "paths of lists cut to fit the size cap",
        },
    }
    out: JsonSchema = {"type": "object", "properties": props, "required": ["trace", *required]}
    if base is not None:
        out["allOf"] = [base]
    return out


def page(row: JsonSchema, extra: Mapping[str, JsonSchema] | None = None) -> JsonSchema:
    """The output schema of a page of rows (see :mod:`opscope.service.queries`)."""
    return result(
        {
            **(extra or {}),
            "rows": {"type": "array", "items": row},
            "total": {"type": "integer", "description": "rows that pass the filter"},
            "offset": {"type": "integer"},
            "next_offset": {
                "type": ["integer", "null"],
                "description": "pass as offset for the next page; null on the last",
            },
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


ANY_OBJECT: JsonSchema = {"type": "object"}
