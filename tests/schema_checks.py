"""Checks of real documents against their types and JSON Schemas (``opscope.documents``).

:func:`undeclared` walks a document along its ``TypedDict`` type: every key the document has
must be declared by the type at that place (a type too loose to describe the document fails),
every required key of the type must be there, and every value must have its declared JSON
type.  Mappings (``dict[str, X]``) check their values against ``X``; ``Any`` accepts
anything.  :func:`check_document` adds the JSON Schema validation (Draft 2020-12) of the JSON
text as opscope writes it.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin, get_type_hints

import orjson
from jsonschema import Draft202012Validator

from opscope.analysis.critical.path import json_default
from opscope.documents import json_schema


def is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _arms(tp: Any) -> tuple[Any, ...]:
    origin = get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return get_args(tp)
    return (tp,)


def _fits(value: Any, tp: Any) -> bool:
    """Whether ``value``'s JSON type is the one ``tp`` describes (shallow)."""
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    origin = get_origin(tp)
    if origin is Literal:
        return value in get_args(tp)
    if is_typeddict(tp) or origin is dict or tp is dict:
        return isinstance(value, dict)
    if origin is list or tp is list:
        return isinstance(value, list)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    raise TypeError(f"no check for type {tp!r}")


def undeclared(value: Any, tp: Any, where: str = "$", out: list[str] | None = None) -> list[str]:
    """Where ``value`` does not fit ``tp`` (see the module docstring); at most 40 places."""
    out = [] if out is None else out
    if len(out) >= 40:
        return out
    arms = [a for a in _arms(tp) if _fits(value, a)]
    if not arms:
        out.append(f"{where}: {type(value).__name__} {str(value)[:60]!r} is not {tp!r}")
        return out
    arm = arms[0]
    origin = get_origin(arm)
    if is_typeddict(arm):
        hints = get_type_hints(arm)
        for key in sorted(arm.__required_keys__ - set(value)):
            out.append(f"{where}: required key {key!r} of {arm.__name__} missing")
        for key, item in value.items():
            if key not in hints:
                out.append(f"{where}.{key}: not declared in {arm.__name__}")
            else:
                undeclared(item, hints[key], f"{where}.{key}", out)
    elif origin is dict:
        _k, item_tp = get_args(arm)
        for key, item in value.items():
            undeclared(item, item_tp, f"{where}[{key!r}]", out)
    elif origin is list:
        (item_tp,) = get_args(arm)
        for i, item in enumerate(value):
            undeclared(item, item_tp, f"{where}[{i}]", out)
    return out


def as_written(doc: Any) -> Any:
    """The document as opscope writes it: JSON text (orjson, NumPy values and the critical
    path's lazy segments serialised), read back."""
    return orjson.loads(orjson.dumps(doc, default=json_default, option=orjson.OPT_SERIALIZE_NUMPY))


def schema_errors(doc: Any, name: str) -> list[str]:
    """JSON Schema validation errors of ``doc`` against the document ``name``'s schema."""
    validator = Draft202012Validator(json_schema(name))
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
        for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.path)))[:20]
    ]


def check_document(doc: Any, name: str) -> None:
    """Assert that ``doc``, as written, validates against its schema and fits its type."""
    from opscope.documents import DOCUMENTS

    data = as_written(doc)
    errors = schema_errors(data, name)
    assert not errors, f"{name}: schema errors:\n" + "\n".join(errors)
    misfits = undeclared(data, DOCUMENTS[name])
    assert not misfits, f"{name}: does not fit its type:\n" + "\n".join(misfits)
