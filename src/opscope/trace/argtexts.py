"""Values read off the ``args`` texts of the events: the recorded input shapes and layouts.

``args`` is compact JSON (ingest removes whitespace outside strings).  :func:`arg_values` gives
each framework event's ``Input Dims``, ``Input type``, ``Input Strides`` and ``Concrete Inputs``
(:data:`ARG_KEYS`) as ``orjson.dumps`` writes the decoded value, in one pass over the bytes by
the C extension where it is built (:func:`opscope.trace.native.top_values`: rows it cannot
prove go through the decoders below), else by vectorised passes (:func:`shape_texts`) and
regular expressions.  :func:`sure_json`, :func:`top_level_strings` and :func:`top_level_ints`
read other values off these texts where that is provably what orjson would decode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace import native
from opscope.trace.arrays import bools, ints
from opscope.trace.threads import map_in_order

if TYPE_CHECKING:
    from collections.abc import Callable

_T = TypeVar("_T")

# The keys :func:`arg_values` reads, in the order of :class:`ArgValues`' columns
ARG_KEYS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")

# RE2 patterns (Arrow) for the two argument lists that change a call's cost, where the C pass
# is not built or not sure.  Concrete Inputs is a flat list of strings; Input Strides nests
# lists up to three deep (tensor lists).
_CONCRETE_RE = r'"Concrete Inputs":(?P<c>\[(?:"(?:[^"\\]|\\.)*"|[^\]"])*\])'
_STRIDES_RE = r'"Input Strides":(?P<s>\[(?:[^\[\]]|\[(?:[^\[\]]|\[[^\[\]]*\])*\])*\])'


@dataclass(frozen=True)
class ArgValues:
    """Per event (row): whether its ``args`` text contains ``"Input Dims"`` (``has``), and the
    text of each :data:`ARG_KEYS` value (dictionary-encoded; null where absent, or where the
    args do not decode)."""

    has: np.ndarray
    dims: pa.ChunkedArray
    types: pa.ChunkedArray
    strides: pa.ChunkedArray
    concrete: pa.ChunkedArray


def arg_values(args: pa.ChunkedArray | pa.Array, rows: np.ndarray | None) -> ArgValues:
    """:class:`ArgValues` of every ``args`` text (of the ``rows`` mask when given; the others
    have none).  ``dims``/``types`` are what :func:`shape_texts` gives; ``strides``/``concrete``
    the values of those keys in the texts with ``"Input Dims"``.  Slices of at most
    ``_PIECE_ROWS`` texts run side by side on threads (the passes release the GIL)."""
    done = _map_pieces(_arg_piece, _pieces(args, rows))
    if not done:
        empty = pa.chunked_array([], pa.dictionary(pa.int32(), pa.string()))
        return ArgValues(np.zeros(0, dtype=bool), empty, empty, empty, empty)
    cols = [pa.chunked_array([d[1][i] for d in done]) for i in range(len(ARG_KEYS))]
    return ArgValues(np.concatenate([d[0] for d in done]), *cols)


def _pieces(
    args: pa.ChunkedArray | pa.Array, rows: np.ndarray | None
) -> list[tuple[pa.Array, np.ndarray | None]]:
    col = args if isinstance(args, pa.ChunkedArray) else pa.chunked_array([args], pa.string())
    pieces: list[tuple[pa.Array, np.ndarray | None]] = []
    at = 0
    for chunk in col.chunks:
        for lo in range(0, len(chunk), _PIECE_ROWS):
            piece = chunk.slice(lo, _PIECE_ROWS)
            pieces.append((piece, None if rows is None else rows[at : at + len(piece)]))
            at += len(piece)
    return pieces


def _map_pieces(
    fn: Callable[[pa.Array, np.ndarray | None], _T],
    pieces: list[tuple[pa.Array, np.ndarray | None]],
) -> list[_T]:
    """``fn`` of each piece, in order; the passes release the GIL, so pieces run side by
    side on threads (as the ingest's runs do)."""
    return map_in_order(lambda p: fn(*p), pieces, _MAX_THREADS)


def _spread(values: pa.Array, has: np.ndarray) -> pa.Array:
    """Values of the ``has`` rows (in order) as a column over all rows (null elsewhere)."""
    nulls = pa.nulls(len(has), pa.string())
    return pc.replace_with_mask(nulls, pa.array(has), values) if has.any() else nulls


def _decoded_piece(texts: pa.Array, want: np.ndarray | None) -> tuple[np.ndarray, list[pa.Array]]:
    """``has`` and the values the decoders give: ``_shape_piece`` for the shapes, the regular
    expressions for the layouts (on the texts with ``"Input Dims"``)."""
    has, dims, types = _shape_piece(texts, want)
    strides = concrete = pa.nulls(len(texts), pa.string())
    if has.any():
        sub = texts.filter(pa.array(has))
        s = pc.struct_field(pc.extract_regex(sub, _STRIDES_RE), [0])
        c = pc.struct_field(pc.extract_regex(sub, _CONCRETE_RE), [0])
        strides, concrete = _spread(s, has), _spread(c, has)
    return has, [_spread(dims, has), _spread(types, has), strides, concrete]


def _arg_piece(texts: pa.Array, want: np.ndarray | None) -> tuple[np.ndarray, list[pa.Array]]:
    got = native.top_values(texts, want, ARG_KEYS)
    if got is None:
        has, cols = _decoded_piece(texts, want)
    else:
        unsure, cols = got
        # where the pass is sure, the quoted key occurs in the text only as the top-level key
        has = bools(cols[0].is_valid())
        slow = np.flatnonzero(unsure)
        if len(slow):
            slow_has, redo = _decoded_piece(texts.take(pa.array(slow)), None)
            has[slow] = slow_has
            mask = pa.array(unsure)
            cols = [pc.replace_with_mask(c, mask, r) for c, r in zip(cols, redo, strict=True)]
    return has, [pc.dictionary_encode(c) for c in cols]


# A run of digits orjson would read as an infinite number (and refuse)
_HUGE_NUMBER = r"[0-9]{309}"
# Values the fast path copies verbatim, as orjson writes them back: lists of plain strings
# (types; dims are checked byte by byte, _plain_int_lists)
_TYPES_VALUE = r'^\[(?:"[^"]*"(?:,"[^"]*")*)?\]$'
# orjson refuses nesting deeper than 1024 levels: a text with this many ``[`` is left to it
# (a shorter text cannot hold them)
_DEEP = 1000


_PIECE_ROWS = 1 << 16  # texts per pass: buffers stay small and are reused, not faulted in anew
_MAX_THREADS = 8


def shape_texts(
    args: pa.ChunkedArray | pa.Array, rows: np.ndarray | None = None
) -> tuple[pa.ChunkedArray, pa.ChunkedArray, np.ndarray]:
    """``Input Dims`` and ``Input type`` of every ``args`` text (of the ``rows`` mask, when
    given; others get None), each as ``orjson.dumps`` writes the value of
    ``orjson.loads(text)``, plus the mask of the rows whose text contains ``"Input Dims"``
    (the others, and texts orjson refuses, give None/None).

    The text is valid, compact JSON (ingest checks it and removes whitespace outside strings).
    Where both values can be proven equal to what orjson would write - one object, no nested
    object, no escape, no number orjson might read otherwise, each key once, values that are
    lists of unsigned integers (dims) or of plain strings (types) - they are cut out of the
    text by a few vectorised passes (a slice of at most ``_PIECE_ROWS`` texts at a time, slices
    on as many threads as there are CPUs); the other texts are decoded with orjson one by one.
    """
    has, dims, types = _shapes_of(args, rows)
    on = pa.array(has)
    nulls = pa.nulls(len(has), pa.string())
    return (
        pa.chunked_array([pc.replace_with_mask(nulls, on, dims.combine_chunks())]),
        pa.chunked_array([pc.replace_with_mask(nulls, on, types.combine_chunks())]),
        has,
    )


def _shapes_of(
    args: pa.ChunkedArray | pa.Array, rows: np.ndarray | None
) -> tuple[np.ndarray, pa.ChunkedArray, pa.ChunkedArray]:
    """:func:`shape_texts` as (mask of the rows with ``"Input Dims"``, their dims, their
    types): the values of those rows only, in row order."""
    done = _map_pieces(_shape_piece, _pieces(args, rows))
    return (
        np.concatenate([h for h, _, _ in done]) if done else np.zeros(0, dtype=bool),
        pa.chunked_array([d for _, d, _ in done], pa.string()),
        pa.chunked_array([t for _, _, t in done], pa.string()),
    )


def _shape_piece(texts: pa.Array, want: np.ndarray | None) -> tuple[np.ndarray, pa.Array, pa.Array]:
    n = len(texts)
    has = np.zeros(n, dtype=bool)
    cand = np.arange(n) if want is None else np.flatnonzero(want)
    if len(cand) < n:
        texts = texts.take(pa.array(cand))
    hit = bools(pc.match_substring_regex(texts, '"Input Dims"')) if len(cand) else has[:0]
    has[cand[hit]] = True
    if not hit.any():
        empty = pa.array([], pa.string())
        return has, empty, empty
    sub = texts.filter(pa.array(hit))
    sure = sure_json(sub, nested=False)
    (dims, d_ok), (types, t_ok) = _values_after(
        sub, ("Dims", "type"), (_plain_int_lists, _plain_string_lists)
    )
    slow = np.flatnonzero(~(sure & d_ok & t_ok))
    if len(slow):
        decoded = [_decode_shape(t) for t in sub.take(pa.array(slow)).to_pylist()]
        mask = pa.array(np.isin(np.arange(len(sub)), slow))
        dims = pc.replace_with_mask(dims, mask, pa.array([d for d, _ in decoded], pa.string()))
        types = pc.replace_with_mask(types, mask, pa.array([t for _, t in decoded], pa.string()))
    return has, dims, types


_INT_LIST_BYTES = np.zeros(256, dtype=bool)
_INT_LIST_BYTES[[ord(c) for c in "[],0123456789"]] = True


def _plain_int_lists(values: pa.Array) -> np.ndarray:
    """Which texts are lists (of lists) of unsigned integers of at most 19 digits, brackets
    balanced: what orjson writes back byte for byte."""
    n = len(values)
    body, starts, ends = _string_buffers(values)
    ok = (ends - starts) >= 2
    if not len(body):
        return np.zeros(n, dtype=bool)
    ok &= body[np.minimum(starts, len(body) - 1)] == ord("[")
    ok &= body[np.maximum(ends - 1, 0)] == ord("]")

    def rows_at(pos: np.ndarray) -> np.ndarray:
        return np.asarray(np.searchsorted(starts, pos, side="right") - 1, dtype=np.int64)

    ok[rows_at(np.flatnonzero(~_INT_LIST_BYTES[body]))] = False
    depth = np.concatenate(
        ([0], np.cumsum((body == ord("[")).astype(np.int64) - (body == ord("]"))))
    )
    ok &= depth[ends] == depth[starts]
    digits = np.concatenate(([0], np.cumsum((body - ord("0")) < 10)))
    if len(body) >= 20:
        run = np.flatnonzero(digits[20:] - digits[:-20] == 20)
        ok[rows_at(run)] = False
    return np.asarray(ok, dtype=bool)


def _plain_string_lists(values: pa.Array) -> np.ndarray:
    """Which texts are lists of strings (no escapes in the text): what orjson writes back."""
    return bools(pc.match_substring_regex(values, _TYPES_VALUE))


def _string_buffers(texts: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes of all the texts, start and end of each text in them) of a string array."""
    n = len(texts)
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset : texts.offset + n + 1]
    offsets = offsets.astype(np.int64)
    data = texts.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    lo = int(offsets[0]) if n else 0
    body = raw[lo : int(offsets[-1])] if n else raw[:0]
    return body, offsets[:-1] - lo, offsets[1:] - lo


_BLOCK = 1 << 20  # bytes per NumPy pass: temporaries stay small (no page faults per pass)


def _scan_bytes(body: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the backslashes, of the exponent marks (``e``/``E`` before a digit or a
    sign) and of the ``{`` in ``body``, a block at a time."""
    found: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
    for lo in range(0, len(body), _BLOCK):
        b = body[lo : lo + _BLOCK + 1]  # one byte more: a mark at the end sees what follows
        head, nxt = b[:-1] if len(b) > _BLOCK else b, b[1:]
        found[0].append(np.flatnonzero(head == ord("\\")) + lo)
        mark = (b[: len(nxt)] | 0x20) == ord("e")
        follows = ((nxt - ord("0")) < 10) | (nxt == ord("+")) | (nxt == ord("-"))
        found[1].append(np.flatnonzero(mark & follows) + lo)
        found[2].append(np.flatnonzero(head == ord("{")) + lo)
    empty = np.zeros(0, dtype=np.int64)
    return tuple(np.concatenate(f) if f else empty for f in found)  # type: ignore[return-value]


def sure_json(texts: pa.Array, nested: bool = True) -> np.ndarray:
    """Which JSON object texts a fast path may read as orjson would (the texts must be valid
    JSON, as ingest writes ``args``): no escape (``\\``), no exponent and no run of 309 digits
    (orjson refuses infinite numbers), not nested 1000 deep, and with ``nested=False`` no
    inner object (every key at the top level).  One pass over the bytes with NumPy."""
    n = len(texts)
    if n == 0:
        return np.zeros(0, dtype=bool)
    body, starts, ends = _string_buffers(texts)
    bad = np.zeros(n, dtype=bool)

    def flag(pos: np.ndarray) -> None:
        bad[np.searchsorted(starts, pos, side="right") - 1] = True

    if len(body):
        first = body[np.minimum(starts, len(body) - 1)]
        bad |= (ends > starts) & (first != ord("{"))
        escapes, exponents, braces = _scan_bytes(body)
        flag(escapes)
        flag(exponents)
        if not nested:
            row = np.searchsorted(starts, braces, side="right") - 1
            bad[row[braces != starts[row]]] = True
    long = np.flatnonzero((ends - starts) >= min(_DEEP, 309))
    if len(long):
        some = texts.take(pa.array(long))
        deep = ints(pc.count_substring_regex(some, r"[\[{]"), 0) >= _DEEP
        huge = bools(pc.match_substring_regex(some, _HUGE_NUMBER))
        bad[long[deep | huge]] = True
    return ~bad


def _top_level_value(texts: pa.Array, key: str) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """Where a top-level ``key``'s value can be read off each JSON object text: the texts
    where the answer is sure (:func:`sure_json`, the key appears at most once, and where it
    appears nothing opens before it but the object itself), the rows where it appears so,
    and the text after the key in each of those rows."""
    sure = sure_json(texts)
    quoted = '"' + key + '":'
    parts = pc.split_pattern(texts, quoted)
    count = ints(pc.list_value_length(parts), 1) - 1
    sure &= count <= 1
    once = np.flatnonzero(sure & (count == 1))
    if not len(once):
        return sure, once, pa.array([], pa.string())
    pick = pa.array(once)
    before = pc.list_element(parts.take(pick), 0)
    after = pc.list_element(parts.take(pick), 1)
    # only the object's own brace before the key: the key is at the top level
    top = ~bools(pc.match_substring_regex(before, r".[\[{]"))
    sure[once[~top]] = False
    return sure, once[top], after.filter(pa.array(top))


def top_level_strings(texts: pa.Array, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The string value of a top-level ``key`` in each JSON object text (None when absent or
    not a string) and where that answer is sure (the others need a decoder): the text is
    :func:`sure_json`, the key appears once, nothing opens before it but the object itself,
    and its value, when a string, has no escape (none in the text)."""
    n = len(texts)
    values = np.full(n, None, dtype=object)
    if n == 0:
        return values, np.zeros(0, dtype=bool)
    sure, once, after = _top_level_value(texts, key)
    ok = bools(pc.starts_with(after, '"'))
    if ok.any():
        quoted_value = after.filter(pa.array(ok))
        text = pc.list_element(pc.split_pattern(quoted_value, '"', max_splits=2), 1)
        values[once[ok]] = np.asarray(text.to_numpy(zero_copy_only=False), dtype=object)
    return values, sure


def top_level_ints(texts: pa.Array, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The value of a top-level ``key`` in each JSON object text where it is a plain integer
    (0 elsewhere), where it is one, and where that answer is sure (the others need a
    decoder): as :func:`top_level_strings`, and a value that is not a plain integer of at most
    18 digits (a float, a string, ``true``, a longer one) is left unsure."""
    n = len(texts)
    values = np.zeros(n, dtype=np.int64)
    has = np.zeros(n, dtype=bool)
    if n == 0:
        return values, has, np.zeros(0, dtype=bool)
    sure, once, after = _top_level_value(texts, key)
    got = pc.extract_regex(after, r"^(?P<v>-?[0-9]{1,18})[,}]")
    ok = bools(got.is_valid())
    sure[once[~ok]] = False
    if ok.any():
        digits = got.field("v").filter(pa.array(ok))
        values[once[ok]] = ints(pc.cast(digits, pa.int64()))
        has[once[ok]] = True
    return values, has, sure


def _values_after(
    sub: pa.Array, keys: tuple[str, ...], checks: tuple[Callable[[pa.Array], np.ndarray], ...]
) -> list[tuple[pa.Array, np.ndarray]]:
    """For each ``"Input <key>":`` of ``keys``: its value in each text (null where the key is
    absent) and whether that value is sure - the key appears once and its value passes the
    key's check in ``checks`` (a mask over value texts).

    One split of the texts at ``"Input `` gives, after each such key, the piece up to the
    next one.  In valid compact JSON a list value is followed by ``,"`` (the next key) or by
    the closing ``}``: the value is cut at the first ``],"`` of its piece, or before the
    piece's last byte (``,`` before the next ``"Input ``, or the final ``}``); a cut that is
    not the value fails the check (strings checked whole, nested lists by their balance).  A
    text holding ``"Input `` elsewhere than in these keys (in a string) only leaves its values
    unsure.
    """
    n = len(sub)
    parts = pc.split_pattern(sub, '"Input ')
    list_offsets = np.frombuffer(parts.buffers()[1], dtype=np.int32)[parts.offset :][: n + 1]
    pieces = parts.values
    counts = np.diff(list_offsets)
    row_of = np.repeat(np.arange(n), counts)
    first_piece = np.zeros(len(pieces), dtype=bool)
    first_piece[list_offsets[:-1][counts > 0]] = True  # the text before the first key
    out: list[tuple[pa.Array, np.ndarray]] = []
    for key, check in zip(keys, checks, strict=True):
        head = key + '":'
        mine = np.flatnonzero(bools(pc.starts_with(pieces, head)) & ~first_piece)
        count = np.bincount(row_of[mine], minlength=n)
        ok = count == 0
        value = pa.nulls(n, pa.string())
        once = mine[count[row_of[mine]] == 1]
        if len(once):
            piece = pieces.take(pa.array(once))
            _, starts, ends = _string_buffers(piece)
            cut = ints(pc.find_substring(piece, '],"'), -1)
            lo = np.minimum(starts + len(head), ends)
            hi = np.maximum(np.where(cut >= 0, starts + cut + 1, ends - 1), lo)
            bounds = np.empty(2 * len(piece), dtype=np.int64)
            bounds[0::2], bounds[1::2] = lo, hi
            base = int(np.frombuffer(piece.buffers()[1], dtype=np.int32)[piece.offset])
            spans = pa.StringArray.from_buffers(
                len(bounds) - 1, pa.py_buffer((bounds + base).astype(np.int32)), piece.buffers()[2]
            )
            found = spans.take(pa.array(np.arange(0, len(bounds), 2)))
            rows = row_of[once]
            ok[rows] = check(found)
            mask = np.zeros(n, dtype=bool)
            mask[rows] = True
            value = pc.replace_with_mask(value, pa.array(mask), found)
        out.append((value, ok))
    return out


def _decode_shape(text: str | None) -> tuple[str | None, str | None]:
    if not text:
        return None, None
    try:
        d = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None, None
    dv = d.get("Input Dims")
    tv = d.get("Input type")
    return (
        orjson.dumps(dv).decode() if dv is not None else None,
        orjson.dumps(tv).decode() if tv is not None else None,
    )
