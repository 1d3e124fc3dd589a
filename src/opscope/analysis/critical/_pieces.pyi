from typing import Any

def dumps(
    rank: Any,
    label: Any,
    name: Any,
    event_id: Any,
    start_ns: Any,
    dur_ns: Any,
    labels: tuple[bytes, ...],
    names: tuple[bytes, ...],
    evidence: tuple[Any, Any, Any, tuple[bytes, ...]] = ...,
    /,
) -> bytes: ...
