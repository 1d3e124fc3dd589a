"""``source``, ``kind`` and ``lane`` of the timed events, per distinct category and name."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from opscope.trace.arrays import FEW_VALUES, unique_ints
from opscope.trace.commnames import is_comm_kernel
from opscope.trace.schema import CATEGORY_MAP, KINDS, SOURCES, SYNC_RUNTIME_MARKERS


def _encoded(col: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """A string column as one dictionary array (as it is when it already is one)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    if pa.types.is_dictionary(col.type):
        return col
    if len(col) <= FEW_VALUES and pa.types.is_string(col.type):
        return _few_encoded(col.to_pylist())
    return col.dictionary_encode()


def _few_encoded(values: list[str | None]) -> pa.DictionaryArray:
    """``dictionary_encode`` of a few strings: the distinct values in order of first appearance,
    int32 indices, a null as a null index."""
    at: dict[str, int] = {}
    idx = [None if v is None else at.setdefault(v, len(at)) for v in values]
    return pa.DictionaryArray.from_arrays(
        pa.array(idx, pa.int32()), pa.array(list(at), pa.string())
    )


def _dict_parts(enc: pa.DictionaryArray) -> tuple[np.ndarray, list[str]]:
    """(indices, dictionary values) of a dictionary array."""
    idx = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int32)
    return idx, enc.dictionary.to_pylist()


def _dictionary(idx: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), pa.array(values, pa.string()))


def classify_table(table: pa.Table) -> pa.Table:
    """Add ``source``, ``kind`` and ``lane`` (dictionary columns) from ``cat``/``name``/``tid``,
    and turn ``cat``, ``name``, ``pid`` and ``tid`` into dictionary columns (encoded once here;
    linking and the event table use them as they are).

    The same rules as :func:`opscope.trace.schema.classify`, evaluated once per distinct
    category and name rather than once per event.
    """
    n = table.num_rows
    for col in ("cat", "name", "pid", "tid"):
        i = table.schema.get_field_index(col)
        table = table.set_column(i, col, _encoded(table.column(col)))
    cat_idx, cats = _dict_parts(table.column("cat").chunk(0))
    name_idx, names = _dict_parts(table.column("name").chunk(0))
    tid_idx, tids = _dict_parts(table.column("tid").chunk(0))
    src_ids = {s: i for i, s in enumerate(SOURCES)}
    kind_ids = {k: i for i, k in enumerate(KINDS)}
    cat_src = np.empty(len(cats), dtype=np.int32)
    cat_kind = np.empty(len(cats), dtype=np.int32)
    for i, c in enumerate(cats):
        s, k = CATEGORY_MAP.get(c.lower(), ("other", "other"))
        cat_src[i] = src_ids[s]
        cat_kind[i] = kind_ids[k]
    step_name = np.fromiter((nm.startswith("ProfilerStep#") for nm in names), bool, len(names))
    sync_name = np.fromiter(
        (any(m in nm.lower() for m in SYNC_RUNTIME_MARKERS) for nm in names), bool, len(names)
    )
    src = cat_src[cat_idx] if n else np.zeros(0, np.int32)
    kind = cat_kind[cat_idx] if n else np.zeros(0, np.int32)
    if n:
        fw, rt, dev = src_ids["framework"], src_ids["runtime"], src_ids["device"]
        kind[(src == fw) & (kind == kind_ids["annotation"]) & step_name[name_idx]] = kind_ids[
            "step"
        ]
        # communication kernels: the name table is evaluated once per distinct kernel name
        kernel = (src == dev) & (kind == kind_ids["kernel"])
        comm_name = np.zeros(len(names), dtype=bool)
        for j in unique_ints(name_idx[kernel]).tolist():
            comm_name[j] = is_comm_kernel(names[j])
        kind[kernel & comm_name[name_idx]] = kind_ids["comm"]
        kind[(src == rt) & sync_name[name_idx]] = kind_ids["sync"]
    # lanes: "thread <tid>" for host events, "stream <tid>" for device events, tid otherwise
    lane_values: dict[str, int] = {}
    group = np.where(src == src_ids["device"], 1, np.where(src == src_ids["other"], 2, 0))
    lut = np.empty((3, len(tids)), dtype=np.int32)
    for g, fmt in enumerate(("thread {}", "stream {}", "{}")):
        for j, t in enumerate(tids):
            lut[g, j] = lane_values.setdefault(fmt.format(t), len(lane_values))
    lane_idx = lut[group, tid_idx] if n else np.zeros(0, np.int32)
    return (
        table.append_column("source", _dictionary(src, list(SOURCES)))
        .append_column("kind", _dictionary(kind, list(KINDS)))
        .append_column("lane", _dictionary(lane_idx, list(lane_values)))
    )
