"""JSON Schemas (draft 2020-12) of the documents, generated from their types with msgspec.

:data:`DOCUMENTS` names each document's top type; :func:`json_schema` gives a document's
schema (``$schema``, ``$id``, ``title`` and ``description``, the top type's properties at the
root, the rest under ``$defs``), :func:`schema_of` the self-contained schema of any of the
types.  The attribute docstrings of the types' fields become the properties' descriptions
(msgspec gives the classes' docstrings).  Objects allow additional properties: keys may be
added to a document within its version, never renamed or removed.
"""

import ast
import copy
import functools
import importlib
import inspect
import itertools
import sys
from typing import Any, Literal, get_args, get_origin, get_type_hints

from opscope.documents.compare import Compare
from opscope.documents.demo import Demo
from opscope.documents.diff import Diff
from opscope.documents.optimize import Optimize
from opscope.documents.peaks import Peaks
from opscope.documents.rank_report import RankReport
from opscope.documents.report import Report
from opscope.documents.roofline import Roofline
from opscope.documents.run import Run
from opscope.errors import OpscopeError

DRAFT = "https://json-schema.org/draft/2020-12/schema"

# Every module whose classes may appear in a schema (their field docstrings are read here).
MODULES = (
    "opscope.documents.peaks",
    "opscope.documents.devices",
    "opscope.documents.head",
    "opscope.documents.tables",
    "opscope.documents.findings",
    "opscope.documents.roofline",
    "opscope.documents.critical_path",
    "opscope.documents.distributed",
    "opscope.documents.neuron",
    "opscope.documents.compare",
    "opscope.documents.demo",
    "opscope.documents.optimize",
    "opscope.documents.report",
    "opscope.documents.rank_report",
    "opscope.documents.diff",
    "opscope.documents.run",
    "opscope.documents.chain",
)

DOCUMENTS: dict[str, type] = {
    "report": Report,
    "rank_report": RankReport,
    "diff": Diff,
    "roofline": Roofline,
    "compare": Compare,
    "demo": Demo,
    "optimize": Optimize,
    "run": Run,
    "peaks": Peaks,
}

# One line per document, for ``opscope schema``.
SUMMARIES: dict[str, str] = {
    "report": "the report of a trace or a job (opscope report --format json)",
    "rank_report": "the analysis of one rank, as a worker sends it back",
    "diff": "trace B against trace A (opscope diff --format json)",
    "roofline": "FLOPs, bytes and bound per op (the report's roofline section)",
    "compare": "variants of a function compared (opscope.compare(...).to_dict())",
    "demo": "the RMSNorm study (opscope demo --format json)",
    "optimize": "the fixes tried on a block and how each did (opscope optimize --format json)",
    "run": "what a profiling run did (run.json of a run folder)",
    "peaks": "device peaks for rooflines (the shipped table; a --peaks file's layout)",
}


class UnknownDocumentError(OpscopeError):
    """A document name that :data:`DOCUMENTS` does not have (the message lists them)."""


def document_id(tp: type) -> str | None:
    """The ``schema`` value of a document's type (``opscope.report/1``), or None."""
    hint = get_type_hints(tp).get("schema")
    if get_origin(hint) is Literal:
        (value,) = get_args(hint)
        return str(value)
    return None


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the document ``name`` (a key of :data:`DOCUMENTS`)."""
    tp = DOCUMENTS.get(name)
    if tp is None:
        raise UnknownDocumentError(
            f"unknown document {name!r}; the documents are: {', '.join(DOCUMENTS)}"
        )
    body = schema_of(tp)
    ident = document_id(tp) or f"opscope.{name}"
    head: dict[str, Any] = {
        "$schema": DRAFT,
        "$id": f"urn:{ident.replace('.', ':', 1)}",
        "title": ident,
        "description": body.pop("description", ""),
    }
    body.pop("$schema", None)
    body.pop("title", None)
    return {**head, **body}


def schema_of(tp: Any) -> dict[str, Any]:
    """A self-contained JSON Schema of ``tp`` (any of the documents' types, or a list or
    union of them): the type's own schema at the root, every type it refers to under
    ``$defs`` (``#/$defs/...`` references resolve within it)."""
    return copy.deepcopy(_schema_of(tp))


@functools.cache
def _schema_of(tp: Any) -> dict[str, Any]:
    import msgspec

    (root,), defs = msgspec.json.schema_components((tp,), ref_template="#/$defs/{name}")
    docs = field_docs()
    for name, definition in defs.items():
        if isinstance(definition.get("description"), str):
            definition["description"] = _one_line(definition["description"])
        props = definition.get("properties")
        if not isinstance(props, dict):
            continue
        for key, text in docs.get(name, {}).items():
            if key in props:
                props[key] = {**props[key], "description": text}
    ref = root.get("$ref")
    if isinstance(ref, str) and len(root) == 1:
        name = ref.rsplit("/", 1)[1]
        body = dict(defs[name])
        # the root's own definition stays in $defs only if something refers back to it
        if ref not in repr({k: v for k, v in defs.items() if k != name}):
            del defs[name]
    else:
        body = dict(root)
    out: dict[str, Any] = {"$schema": DRAFT, **body}
    if defs:
        out["$defs"] = dict(sorted(defs.items()))
    return out


@functools.lru_cache(maxsize=1)
def field_docs() -> dict[str, dict[str, str]]:
    """Class name -> field -> the field's attribute docstring, inherited ones included, over
    :data:`MODULES` (class names are unique across them)."""
    own: dict[str, dict[str, str]] = {}
    bases: dict[str, list[str]] = {}
    for modname in MODULES:
        module = sys.modules.get(modname) or importlib.import_module(modname)
        try:
            tree = ast.parse(inspect.getsource(module))
        except (OSError, TypeError):  # no source (a frozen build): no field descriptions
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                own[node.name] = _attribute_docs(node)
                bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]

    def merged(name: str, seen: frozenset[str] = frozenset()) -> dict[str, str]:
        out: dict[str, str] = {}
        for base in bases.get(name, []):
            if base in own and base not in seen:
                out.update(merged(base, seen | {name}))
        out.update(own.get(name, {}))
        return out

    return {name: merged(name) for name in own}


def _attribute_docs(node: ast.ClassDef) -> dict[str, str]:
    """``field: type`` followed by a string literal: that string, per field."""
    out: dict[str, str] = {}
    body = node.body
    for stmt, nxt in itertools.pairwise(body):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            out[stmt.target.id] = _one_line(nxt.value.value)
    return out


def _one_line(text: str) -> str:
    """A docstring as one line (they are wrapped at 100 columns in the source)."""
    return " ".join(text.split())


__all__ = [
    "DOCUMENTS",
    "DRAFT",
    "SUMMARIES",
    "UnknownDocumentError",
    "document_id",
    "field_docs",
    "json_schema",
    "schema_of",
]
