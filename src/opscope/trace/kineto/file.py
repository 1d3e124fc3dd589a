"""One Kineto file: streamed, its runs converted in worker processes (or threads), merged in
file order; and the reader's warnings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pyarrow as pa

from opscope.trace import native
from opscope.trace.gcpause import collector_paused
from opscope.trace.kineto.builder import KinetoBuilder
from opscope.trace.kineto.columns import KinetoParse
from opscope.trace.kineto.convert import RunParts, convert_bytes, convert_run, convert_structured
from opscope.trace.kineto.times import NeedsQuoting
from opscope.trace.rows import NotTyped

if TYPE_CHECKING:
    from concurrent.futures import Executor

# below this many bytes of events, starting processes costs more than it saves
PARALLEL_MIN_BYTES = 4 << 20
_MAX_WORKERS = 4


def _batch_bytes(batch: pa.RecordBatch | None) -> bytes | None:
    if batch is None:
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def _batch_from(data: Any) -> pa.RecordBatch | None:
    if not isinstance(data, bytes):
        return data  # None, or a batch converted in this process
    with pa.ipc.open_stream(pa.py_buffer(data)) as reader:
        return reader.read_next_batch()


def _portable(parts: RunParts) -> RunParts:
    """``parts`` with its batches as IPC bytes (cheaper to send between processes)."""
    return RunParts(
        parts.count,
        parts.dropped,
        _batch_bytes(parts.timed),
        parts.timed_skips,
        parts.others,
        parts.reasons,
        _batch_bytes(parts.flows),
        parts.flows_bad,
    )


def _restored(parts: RunParts) -> RunParts:
    parts.timed = _batch_from(parts.timed)
    parts.flows = _batch_from(parts.flows)
    return parts


def _convert_piece(piece: bytes, quote: bool, portable: bool) -> tuple[RunParts, bool] | None:
    """Decode and convert one guessed run; None when the guess was wrong (not an array).

    Returns the parts and whether the run was decoded with long timestamps quoted.
    """
    got = convert_bytes(piece, quote)
    if got is None:
        return None
    parts, quoted = got
    return (_portable(parts) if portable else parts), quoted


def _typed_tail(
    rest: bytes, form: str, quote: bool
) -> tuple[RunParts, int, dict[str, Any], bool] | None:
    """The tail through the typed decoder: ``(parts, events, keys after the array, quoted)``,
    or None when it does not fit (cut short, unusual values):
    :func:`~opscope.trace.jsonrecover.decode_tail` decides."""
    from opscope.trace.jsondecode import loads

    meta: dict[str, Any] = {}
    if form == "object":
        try:
            doc = msgspec.json.decode(b'{"traceEvents":[' + rest, type=dict[str, msgspec.Raw])
        except (msgspec.DecodeError, RecursionError, ValueError):
            return None
        raw = doc.pop("traceEvents", None)
        if raw is None:
            return None
        body = bytes(raw).strip()
        if not (body.startswith(b"[") and body.endswith(b"]")):
            return None
        piece = body[1:-1]
        try:
            meta = {k: loads(bytes(v)) for k, v in doc.items()}
        except ValueError:
            return None
    elif form == "array":
        body = rest.rstrip()
        if not body.endswith(b"]"):
            return None
        piece = body[:-1]
    else:
        return None
    try:
        parts = convert_structured(piece)
    except NotTyped:
        return None
    return parts, parts.count, meta, quote


def _convert_tail(
    rest: bytes, form: str, quote: bool, portable: bool
) -> tuple[RunParts | None, int, dict[str, Any], bool, bool, list[tuple[int, int, bytes]]]:
    """The tail (see :func:`~opscope.trace.jsonrecover.decode_tail`), converted."""
    from opscope.trace.jsonrecover import decode_tail

    typed = _typed_tail(rest, form, quote)
    if typed is not None:
        tparts, n_events, meta, quoted = typed
        return (_portable(tparts) if portable else tparts), n_events, meta, False, quoted, []
    events, meta, cut, quoted, skipped = decode_tail(rest, form, quote)
    if events is None or (cut and not events):
        return None, 0, meta, cut, quoted, skipped
    parts = convert_run(events) if events else RunParts(0, 0, None, [], [], [], None, 0)
    return (_portable(parts) if portable else parts), len(events), meta, cut, quoted, skipped


def _workers(workers: int | None) -> int:
    """Worker processes for one file: 0 where they cannot be forked or are nested."""
    import os

    if workers is None:
        workers = min(os.cpu_count() or 1, _MAX_WORKERS)
    # a process that never imported multiprocessing is none of its workers
    mp = sys.modules.get("multiprocessing")
    if (
        workers < 2
        or not sys.platform.startswith("linux")
        or (mp is not None and mp.parent_process() is not None)  # a worker: no nesting
    ):
        return 0
    return workers


def parse_file(
    path: Path,
    *,
    max_bytes: int | None = None,
    workers: int | None = None,
    head_bytes: int | None = None,
) -> tuple[KinetoParse, list[str]]:
    """Stream and convert one Kineto file (not linked): its columns and the reader's warnings.

    ``head_bytes``: the events of the first that many decompressed bytes only (a preview; the
    event cut at the end is dropped, as in a trace cut short, and a warning says so).

    Runs are decoded and converted in ``workers`` forked processes (default: the CPU count, at
    most 4) when the file holds more than :data:`PARALLEL_MIN_BYTES` of events; the parent
    decompresses, cuts runs and merges the results in file order, so the outcome is the one
    the sequential path gives.  A guessed cut that does not decode (the bytes of ``},{``
    inside a string) makes the file go through the sequential path instead.
    """
    from opscope.trace.jsonstream import EventStream
    from opscope.trace.readers import ByteStream

    # the decoded events are acyclic: the cyclic collector only costs time while they live
    with collector_paused():
        data = ByteStream(path, max_bytes, stop_after=head_bytes)
        stream = EventStream(data, str(path))
        got = _parse_pooled(stream, _workers(workers))
        if got is not None:
            return got, _warnings(path, data, stream)
        # a guessed cut fell inside an event: guess again, run by run
        data = ByteStream(path, max_bytes, stop_after=head_bytes)
        stream = EventStream(data, str(path))
        builder = KinetoBuilder()
        for events, piece in stream:
            try:
                builder.add(events, strict=piece is not None)
            except NeedsQuoting:
                # a double cannot hold this trace's timestamps: decode them as text from here on
                stream.quote = True
                assert piece is not None
                again = stream.decode_piece(piece)
                builder.add(again if again is not None else events)
            del events, piece
        return _finish(builder, stream), _warnings(path, data, stream)


NOT_JSON = "not JSON (skipped to the next event)"


def _finish(builder: KinetoBuilder, stream: Any) -> KinetoParse:
    if stream.invalid:
        builder.skipped[NOT_JSON] += len(stream.invalid)
    return builder.finish(stream.meta)


def _warnings(path: Path, data: Any, stream: Any) -> list[str]:
    from opscope.trace.jsonblanks import BLANK_RUN

    warnings = []
    if data.cut:
        warnings.append(f"{path}: {data.cut}")
    if stream.warning:
        warnings.append(stream.warning)
    if stream.blanks.spaces:
        n = stream.blanks.spaces
        warnings.append(
            f"{path}: {n} run{'s' if n > 1 else ''} of more than {BLANK_RUN // 1024} KiB of "
            "spaces shortened while reading (bytes between events cost no memory; a string "
            "holding such a run would be shorter)"
        )
    if stream.invalid:
        at, head = stream.invalid[0]
        n = len(stream.invalid)
        text = head.decode("utf-8", "replace").strip()
        warnings.append(
            f"{path}: {n} event{'s' if n > 1 else ''} that {'are' if n > 1 else 'is'} not "
            f"JSON skipped, every other event kept (the first at byte {at} of the JSON, "
            f"near ...{text!r}...; a name holding an unescaped quote, which torch's trace "
            "export does not escape, is one cause)"
        )
    return warnings


def _process_pool(n_workers: int) -> Executor:
    """A pool of ``n_workers`` forked processes (the Python decoders hold the GIL)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    return ProcessPoolExecutor(n_workers, mp_context=get_context("fork"))


def _parse_pooled(stream: Any, n_workers: int) -> KinetoParse | None:
    """:func:`parse_file` over guessed runs, in ``n_workers`` processes (0: in this one).

    None: a guessed cut was wrong; redo with :class:`~opscope.trace.jsonstream.EventStream`'s
    own iteration, which guesses again run by run."""
    from collections import deque

    # BrokenProcessPool's base: catching it imports no multiprocessing for a thread pool
    from concurrent.futures import BrokenExecutor, Future, ThreadPoolExecutor

    from opscope.trace.jsondecode import LONG_TS

    builder = KinetoBuilder()
    pool: Executor | None = None
    # the C scanner releases the GIL: threads share the runs out with no copy between
    # processes; the Python decoders hold it, so without the scanner the runs go to processes
    portable = not native.enabled()
    # (piece, quoted when submitted, its future); results are merged strictly in file order
    pending: deque[tuple[bytes, bool, Future[Any]]] = deque()
    held: list[bytes] = []  # runs read before deciding whether a pool pays
    held_bytes = 0
    quote = False

    def merge(piece: bytes, asked: bool, result: tuple[RunParts, bool] | None) -> bool:
        nonlocal quote
        if result is None:
            return False
        parts, quoted = result
        if quote and not quoted and not asked and LONG_TS.search(piece):
            # an earlier run (still in flight when this one left) turned quoting on
            redo = _convert_piece(piece, True, False)
            if redo is None:
                return False
            parts, quoted = redo
        quote = quote or quoted
        stream.events_seen += parts.count
        builder.merge(_restored(parts))
        return True

    def drain(limit: int) -> bool:
        while len(pending) > limit:
            piece, asked, fut = pending.popleft()
            try:
                result = fut.result()
            except BrokenExecutor:  # a worker died (killed for memory?): redo in-process
                return False
            if not merge(piece, asked, result):
                return False
        return True

    try:
        for kind, item in stream.split():
            if kind == "events":  # decoded whole: nothing to share out
                builder.add(item)
                continue
            if kind == "piece":
                if not n_workers:
                    if not merge(item, quote, _convert_piece(item, quote, False)):
                        return None
                    continue
                if pool is None:
                    held.append(item)
                    held_bytes += len(item)
                    if held_bytes < PARALLEL_MIN_BYTES:
                        continue
                    pool = _process_pool(n_workers) if portable else ThreadPoolExecutor(n_workers)
                    for p in held:
                        fut = pool.submit(_convert_piece, p, quote, portable)
                        pending.append((p, quote, fut))
                    held = []
                else:
                    fut = pool.submit(_convert_piece, item, quote, portable)
                    pending.append((item, quote, fut))
                if not drain(2 * n_workers):
                    return None
                continue
            # the tail
            for p in held:
                if not merge(p, quote, _convert_piece(p, quote, False)):
                    return None
            held = []
            tail: Any
            if pool is not None:
                tail = pool.submit(_convert_tail, item, stream.form, quote, portable)
                if not drain(0):
                    return None
                tail = tail.result()
            else:
                tail = _convert_tail(item, stream.form, quote, False)
            parts, n_events, meta, cut, _, skipped = tail
            stream.end(n_events, meta, cut, skipped)
            if parts is not None:
                builder.merge(_restored(parts))
    finally:
        if pool is not None:
            for _, _, fut in pending:
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
    return _finish(builder, stream)
