"""Tool specs, the check of a call's arguments, and dispatch.

A tool is a :class:`ToolSpec`: its name, a description for the model, a closed input schema,
an output schema (built on first use: it reads :mod:`opscope.documents`) and a handler
``(workspace, arguments) -> Answer``.  :func:`check_arguments` applies the input schema's
rules itself (types, enums, ranges, lengths, unknown and missing arguments) so that each
refusal says what to pass instead; the handler then sees defaults filled in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opscope.errors import OpscopeError
from opscope.mcp.schemas import JsonSchema

if TYPE_CHECKING:
    from opscope.service import Workspace


class ToolError(OpscopeError):
    """A call the tool refuses (bad arguments, nothing to answer): its message is for the
    model and says what to call or pass instead."""


@dataclass
class Answer:
    """A tool's result: Markdown ``text`` for the model and ``data``, the structured content
    (it matches the tool's output schema)."""

    text: str
    data: dict[str, Any]


def _no_progress(done: float, total: float, message: str) -> None:
    return None


@dataclass
class Session:
    """What a tool call may use: the open traces, the folders ``open_trace`` may read
    (``None``: any path the process can read), and ``progress(done, total, message)``, which
    reports on long work to a client that asked for progress (a no-op otherwise)."""

    workspace: Workspace
    roots: tuple[Path, ...] | None = None
    progress: Callable[[float, float, str], None] = _no_progress


class Arguments(dict[str, Any]):
    """A call's arguments, checked, with defaults filled in; ``given``: the names the call
    passed (so a hint can repeat the call as it was made)."""

    given: tuple[str, ...] = ()


Handler = Callable[[Session, Arguments], Answer]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: JsonSchema
    output: Callable[[], JsonSchema]
    handler: Handler
    read_only: bool = True
    opens: bool = False  # reads files the caller names (open_trace, compare)
    _cache: dict[str, JsonSchema] = field(default_factory=dict, compare=False, repr=False)

    @property
    def output_schema(self) -> JsonSchema:
        if "out" not in self._cache:
            self._cache["out"] = hoist_defs(self.output())
        return self._cache["out"]


def hoist_defs(schema: JsonSchema) -> JsonSchema:
    """``schema`` with every nested ``$defs`` moved to its root, where ``#/$defs/...``
    references resolve (document schemas embedded as row types carry their own)."""
    defs: dict[str, Any] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            inner = node.get("$defs")
            out = {k: walk(v) for k, v in node.items() if k != "$defs"}
            if isinstance(inner, dict):
                for k, v in inner.items():
                    defs.setdefault(k, walk(v))
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out: JsonSchema = walk(schema)
    if defs:
        out["$defs"] = defs
    return out


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _type_ok(value: Any, kinds: str | list[str]) -> bool:
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        if kind in ("integer", "number") and isinstance(value, bool):
            continue
        if isinstance(value, _TYPES[kind]):
            return True
        if kind == "integer" and isinstance(value, float) and value.is_integer():
            return True
    return False


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(value: Any, schema: JsonSchema, where: str) -> None:
    kinds = schema.get("type")
    if kinds is not None and not _type_ok(value, kinds):
        want = kinds if isinstance(kinds, str) else " or ".join(kinds)
        raise ToolError(f"{where}: expected {want}, got {type(value).__name__} {_show(value)}")
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"{where}: {_show(value)} is not one of {', '.join(schema['enum'])}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            raise ToolError(f"{where}: must not be empty")
        if len(value) > schema.get("maxLength", 1 << 62):
            raise ToolError(f"{where}: longer than {schema['maxLength']} characters")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            raise ToolError(f"{where}: {_show(value)} does not match {schema['pattern']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolError(f"{where}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ToolError(f"{where}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", 1 << 62):
            raise ToolError(f"{where}: more than {schema['maxItems']} items")
        if len(value) < schema.get("minItems", 0):
            raise ToolError(f"{where}: at least {schema['minItems']} items")
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(value):
                _check(v, items, f"{where}[{i}]")


def check_arguments(spec: ToolSpec, arguments: Mapping[str, Any] | None) -> Arguments:
    """The call's arguments checked against ``spec``'s input schema, defaults filled in;
    :class:`ToolError` naming the argument and what it takes otherwise."""
    schema = spec.input_schema
    props: dict[str, JsonSchema] = schema.get("properties", {})
    given = dict(arguments or {})
    unknown = [k for k in given if k not in props]
    if unknown:
        takes = ", ".join(props) or "no arguments"
        raise ToolError(f"{spec.name}: unknown argument {unknown[0]!r}; it takes: {takes}")
    missing = [k for k in schema.get("required", []) if k not in given]
    if missing:
        raise ToolError(f"{spec.name}: missing required argument {missing[0]!r}")
    out = Arguments()
    for name, sub in props.items():
        if name in schema.get("required", []) and given.get(name) is None:
            raise ToolError(f"{spec.name}: {name!r} must not be null")
        if name in given and given[name] is not None:
            value = given[name]
            if sub.get("type") == "integer" and isinstance(value, float) and value.is_integer():
                value = int(value)  # JSON Schema: 3.0 is an integer
            _check(value, sub, f"{spec.name}.{name}")
            out[name] = value
        else:
            out[name] = sub.get("default")
    out.given = tuple(k for k in props if given.get(k) is not None)
    return out


class Registry:
    """The tools by name, in the order they are listed."""

    def __init__(self, specs: list[ToolSpec]) -> None:
        self.specs = {s.name: s for s in specs}
        if len(self.specs) != len(specs):
            raise ValueError("two tools share a name")

    def get(self, name: str) -> ToolSpec:
        spec = self.specs.get(name)
        if spec is None:
            raise ToolError(f"no tool {name!r}: the tools are {', '.join(self.specs)}")
        return spec

    def call(self, session: Session, name: str, arguments: Mapping[str, Any] | None) -> Answer:
        """Check the arguments and run the tool (errors propagate: see
        :func:`opscope.mcp.server.answer`)."""
        spec = self.get(name)
        return spec.handler(session, check_arguments(spec, arguments))
