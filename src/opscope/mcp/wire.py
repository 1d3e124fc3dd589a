"""JSON-RPC answers to the lines the SDK cannot read.

The SDK's stdio transport hands the server an exception for a line that is not JSON or not a
JSON-RPC message, and the server drops it: the client waits for an answer that never comes.
:class:`AnswerUnreadable` wraps the transport's read side so that each such line gets the
error JSON-RPC 2.0 prescribes (section 5.1): ``-32700`` (parse error, ``id`` null) for a line
that is not JSON, ``-32600`` (invalid request, with the request's ``id`` when it has one) for
JSON that is no JSON-RPC message.  No answer quotes the line.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def error_for(exc: Exception) -> tuple[int, str, str | int | None] | None:
    """``(code, message, id)`` of the answer to a line the SDK could not read (``exc``, its
    validation error), or None when the exception is not of that kind."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        items: list[dict[str, Any]] = list(errors())
    except Exception:
        return None
    if any(e.get("type") == "json_invalid" for e in items):
        return PARSE_ERROR, "Parse error: the line is not JSON", None
    request_id: str | int | None = None
    for e in items:
        raw = e.get("input")
        if isinstance(raw, dict):
            rid = raw.get("id")
            if isinstance(rid, str | int) and not isinstance(rid, bool):
                request_id = rid
                break
    return INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message", request_id


class AnswerUnreadable:
    """A read stream of the SDK's transport (``receive``, async iteration, ``last_context``)
    that answers the lines it could not read on ``write`` (see the module docstring) instead
    of passing their exceptions on."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write

    @property
    def last_context(self) -> Any:
        return getattr(self._read, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._read.receive()
            if not isinstance(item, Exception):
                return item
            answer = error_for(item)
            if answer is None:
                return item
            await self._write.send(_message(*answer))

    async def aclose(self) -> None:
        await self._read.aclose()

    def __aiter__(self) -> AnswerUnreadable:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnswerUnreadable:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def _message(code: int, message: str, request_id: str | int | None) -> Any:
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    error = types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )
    return SessionMessage(error)


__all__ = ["INVALID_REQUEST", "PARSE_ERROR", "AnswerUnreadable", "error_for"]
