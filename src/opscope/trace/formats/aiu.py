"""IBM AIU (Spyre) traces as the AIU runtime writes them: a JSON array of begin/end events
(``"ph": "B"`` / ``"E"``) with their details under ``attr`` rather than ``args``, no
categories, one process id per AIU card (``pid`` 0, 1, 2...), 64-bit unsigned thread ids.

What the loader makes of it, before the Kineto conversion pairs begins with ends:

* ``attr`` becomes the event's ``args`` (sizes, ``CollGroup``, peers: every key as written);
* a category from the name: ``... Cmpt Exec`` is the card computing (``aiu_compute``, a
  kernel), ``... Cmpt Prep`` its preparation (``aiu_prep``, a runtime call: it spans the wait
  for a collective's input, which is not compute); ``SenRdmaSend_*`` / ``SenRdmaReceive_*``
  (``... DmaO`` / ``... DmaI``) the card's RDMA transfers to and from its peers (``aiu_rdma``,
  kernels, which the communication table classes as communication); another ``Dma*`` a copy
  (``aiu_dma``); anything else keeps no category;
* one rank per card: rank ``k`` is the ``k``-th process id in numeric order (rank origin
  ``order (process id)``); the cards' ``Peer`` attributes name these ids;
* the device is ``IBM AIU`` (kind ``aiu``).

The file is decoded whole (AIU traces are small) and not cached.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

import orjson

from opscope.errors import TraceError
from opscope.trace.kineto.builder import parse_kineto
from opscope.trace.model import Trace
from opscope.trace.parts import combine, to_part
from opscope.trace.readers import head, max_decompressed_bytes

NAME = "aiu"
DEVICE_NAME = "IBM AIU"
DEVICE_KIND = "aiu"
RANK_ORIGIN = "order (process id)"

_HEAD_BYTES = 64 << 10
_GZIP_MAGIC = b"\x1f\x8b"
_ATTR = re.compile(rb'"attr"\s*:\s*\{')
_ARGS = re.compile(rb'"args"\s*:')

# name -> category, first match wins (see the module docstring)
CATEGORIES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bCmpt Exec$"), "aiu_compute"),
    (re.compile(r"\bCmpt Prep$"), "aiu_prep"),
    (re.compile(r"^SenRdma(?:Send|Receive)"), "aiu_rdma"),
    (re.compile(r"\bDma[A-Za-z]*$"), "aiu_dma"),
)


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        raw = fh.read(_HEAD_BYTES)
    if raw.startswith(_GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as gz:
                return gz.read(_HEAD_BYTES)
        except (OSError, EOFError):
            return b""
    return raw


def sniff(path: Path) -> bool:
    """A file holding a bare JSON array whose first event carries ``attr`` and no ``args``
    (Kineto and Chrome traces write ``args``)."""
    if not path.is_file():
        return False
    try:
        seen = head(path, _HEAD_BYTES)[0]  # shared with the other sniffers (formats.detect)
    except (TraceError, OSError):
        seen = b""
    if seen.strip() and not seen.lstrip().startswith(b"["):
        return False  # the same first bytes _head reads: not an array
    try:
        text = _head(path).lstrip()
    except OSError:
        return False
    if not text.startswith(b"[") or not text[1:].lstrip().startswith(b"{"):
        return False
    attr = _ATTR.search(text)
    if attr is None:
        return False
    args = _ARGS.search(text)
    return args is None or args.start() > attr.start()


def category(name: str) -> str | None:
    """The category the loader gives an event of this name (None: none)."""
    for pattern, cat in CATEGORIES:
        if pattern.search(name):
            return cat
    return None


def _read(path: Path, max_bytes: int | None) -> Any:
    limit = max_decompressed_bytes(max_bytes)
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
        if data.startswith(_GZIP_MAGIC):
            with gzip.open(path, "rb") as gz:
                data = gz.read(limit + 1)
    except (OSError, EOFError) as exc:
        raise TraceError(f"{path}: {exc}") from None
    if len(data) > limit:
        raise TraceError(f"{path}: over the {limit} byte limit")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        import json

        try:  # integers past 64 bits, which orjson refuses
            return json.loads(data)
        except ValueError as exc:
            raise TraceError(f"{path}: not JSON ({exc})") from None


def _event(e: dict[str, Any]) -> dict[str, Any]:
    ev = dict(e)
    attr = ev.pop("attr", None)
    if isinstance(attr, dict) and attr and "args" not in ev:
        ev["args"] = attr
    if "cat" not in ev and isinstance(ev.get("name"), str):
        cat = category(ev["name"])
        if cat is not None:
            ev["cat"] = cat
    return ev


def _pid_key(pid: str) -> tuple[int, int, str]:
    return (0, int(pid), pid) if pid.isdigit() else (1, 0, pid)


def documents(data: Any) -> list[tuple[str, dict[str, Any]]]:
    """(process id, Kineto document of that card's events) per card, in process id order."""
    if not isinstance(data, list):
        raise ValueError("an AIU trace is a JSON array of events")
    by_pid: dict[str, list[dict[str, Any]]] = {}
    for e in data:
        if isinstance(e, dict):
            by_pid.setdefault(str(e.get("pid", "")), []).append(_event(e))
    meta = {"deviceProperties": [{"id": 0, "name": DEVICE_NAME}], "device_kind": DEVICE_KIND}
    return [
        (pid, {**meta, "traceEvents": by_pid[pid]}) for pid in sorted(by_pid, key=_pid_key)
    ] or [("", {**meta, "traceEvents": []})]


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """The AIU trace at ``path``: one rank per card (see the module docstring)."""
    try:
        docs = documents(_read(path, max_bytes))
    except ValueError as exc:
        raise TraceError(f"{path}: {exc}") from None
    parts = [to_part(parse_kineto(doc), [], str(path)) for _pid, doc in docs]
    ranks = [(i, RANK_ORIGIN if len(docs) > 1 else "order") for i in range(len(docs))]
    trace = combine([path] * len(parts), parts, ranks)
    trace.meta.paths = [str(path)]
    trace.meta.format = NAME
    trace.meta.cached = False
    return trace
