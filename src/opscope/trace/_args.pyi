from typing import Any

def values(
    offsets: Any, data: Any, n: int, mask: Any, keys: tuple[bytes, ...], /
) -> tuple[bytes, ...] | None: ...
