from typing import Any

def chains(
    order: Any,
    hrows: Any,
    rowi: tuple[Any, ...],
    rowb: tuple[Any, ...],
    codes: Any,
    out_src: Any,
    out_dst: Any,
    out_w: Any,
    out_label: Any,
    out_attr: Any,
    out_kind: Any,
    width: int = 8,
    /,
) -> int: ...
