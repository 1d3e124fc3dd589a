from typing import Any

def longest(src: Any, dst: Any, weight: Any, dist: Any, pred: Any, keep: Any = None, /) -> int: ...
def walk(pred: Any, src: Any, ends: Any, out: Any, counts: Any, width: int = 8, /) -> int: ...
def region(
    indptr: Any,
    order: Any,
    src: Any,
    dst: Any,
    weight: Any,
    label: Any,
    stop: Any,
    source: int,
    nlab: int,
    dist: Any,
    pred: Any,
    lab: Any,
    origin: Any,
    indeg: Any,
    seen: Any,
    out: Any,
    /,
) -> int: ...
def contract(
    indptr: Any,
    order: Any,
    src: Any,
    dst: Any,
    weight: Any,
    label: Any,
    stop: Any,
    nlab: int,
    sources: Any,
    pos: Any,
    dist: Any,
    pred: Any,
    lab: Any,
    origin: Any,
    indeg: Any,
    seen: Any,
    out: Any,
    /,
) -> tuple[bytes, bytes]: ...
