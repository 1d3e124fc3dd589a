"""The event index: codes, id -> row mapping, the op tree and the recorded shapes."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from opscope.trace import Trace, load_document
from opscope.trace.argtexts import shape_texts
from opscope.trace.arrays import Codes, bools, ints, strings
from opscope.trace.derived import build_kernels, build_ops
from opscope.trace.index import EventIndex


def _reference_shape(text: str | None) -> tuple[str | None, str | None]:
    """What the op table held before the index: orjson over each text."""
    if not text or '"Input Dims"' not in text:
        return None, None
    try:
        d = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None, None
    dv, tv = d.get("Input Dims"), d.get("Input type")
    return (
        orjson.dumps(dv).decode() if dv is not None else None,
        orjson.dumps(tv).decode() if tv is not None else None,
    )


SHAPE_TEXTS = [
    None,
    "",
    "{}",
    '{"External id":1,"Input Dims":[[2,3],[3]],"Input type":["float","float"]}',
    '{"Input type":["c10::Half",""],"Concrete Inputs":["","1"],"Input Dims":[[4],[]],"x":1}',
    '{"Input Dims":[[1,2]]}',  # the last member, no types
    '{"Input Dims":[],"Input type":[]}',
    '{"Input Dims":[[[2,3],[4]],[5]],"Input type":["TensorList","float"]}',  # nested lists
    '{"Input Dims":[[-1,2]],"Input type":["float"]}',  # a sign
    '{"Input Dims":[[1.5]],"Input type":["float"]}',  # a float
    '{"Input Dims":[[123456789012345678901234]],"Input type":["float"]}',  # beyond int64
    '{"Input Dims":[[1]],"Input type":["float"],"big":1e400}',  # orjson refuses
    '{"Input Dims":[[1]],"Input type":["float"],"e":2E5}',
    '{"Input Dims":[[1]],"Input Dims":[[2]],"Input type":["float"]}',  # last one wins
    '{"Input Dims":[[1]],"Input type":["a"],"Input type":["b"]}',
    '{"inner":{"Input Dims":[[9]]},"Input type":["float"]}',  # not a top-level key
    '{"Input Dims":[[1]],"inner":{"a":1},"Input type":["float"]}',
    '{"Input\\u0020Dims":[[7]],"Input Dims":[[1]],"Input type":["float"]}',  # an escaped key
    '{"Input Dims":[[1]],"Input type":["with \\"quote\\""]}',
    '{"Input Dims":[[1]],"Input type":["caf\\u00e9"]}',
    '{"Input Dims":[[1]],"Input type":["café","x],\\"y"]}',
    '{"Input Dims":[[1]],"Input type":["a],","b"],"z":0}',  # ],"  inside a string
    '{"Input Dims":[[1]],"Input type":[null,"float"]}',
    '{"Input Dims":null,"Input type":["float"]}',
    '{"Input Dims":[[1]],"Input type":null}',
    '{"Input Dims":5,"Input type":"float"}',
    '{"name":"Input Dims","Input type":["float"]}',  # only a string value
    ', {"Input Dims":[[1]],"Input type":["float"]}',  # a stray separator: orjson refuses
    '{"Input Dims":[[1]],"Input type":["float"],"deep":' + "[" * 1100 + "]" * 1100 + "}",
    '{"Input Dims":[[1]],"Input type":["float"],"shallow":' + "[" * 600 + "]" * 600 + "}",
    '{"Input Dims":[[' + ",".join(["1"] * 800) + ']],"Input type":["float"]}',
]


def test_shape_texts_agree_with_orjson() -> None:
    dims, types, has = shape_texts(pa.array(SHAPE_TEXTS, pa.string()))
    got = list(zip(dims.to_pylist(), types.to_pylist(), strict=True))
    want = [_reference_shape(t) for t in SHAPE_TEXTS]
    for text, g, w in zip(SHAPE_TEXTS, got, want, strict=True):
        assert g == w, text
    assert has.tolist() == [bool(t) and '"Input Dims"' in t for t in SHAPE_TEXTS]


def test_shape_texts_over_chunks_and_without_shapes() -> None:
    col = pa.chunked_array([pa.array(SHAPE_TEXTS[:10]), pa.array(SHAPE_TEXTS[10:])])
    dims, _, _ = shape_texts(col)
    assert dims.to_pylist() == [_reference_shape(t)[0] for t in SHAPE_TEXTS]
    dims, types, has = shape_texts(pa.array(['{"a":1}', None], pa.string()))
    assert dims.to_pylist() == types.to_pylist() == [None, None]
    assert not has.any()


def test_codes_sorted_distinct_with_nulls() -> None:
    # an unsorted dictionary holding a value twice, and nulls in the indices
    arr = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, None, 2, 0, 3], pa.int32()), pa.array(["b", "a", "b", ""])
    )
    c = Codes.of(pa.chunked_array([arr]))
    assert c.values.tolist() == ["", "a", "b"]
    assert c.codes.tolist() == [2, 1, -1, 2, 2, 0]
    assert c.strings().tolist() == ["b", "a", "", "b", "b", ""]
    assert c.eq("b").tolist() == [True, False, False, True, True, False]
    assert c.eq("").tolist() == [False, False, True, False, False, True]  # null reads as ""
    assert c.isin(["a", "zz"]).tolist() == [False, True, False, False, False, False]
    assert c.matches("^$").tolist() == [False, False, False, False, False, True]  # not null
    assert c.starts_with("b").tolist() == [True, False, False, True, True, False]
    assert c.code("a") == 1 and c.code("nope") == -1
    assert c[2] == "" and c[0] == "b"
    assert c.text_codes().tolist() == [2, 1, 0, 2, 2, 0]


def test_codes_of_chunks_with_different_dictionaries_and_plain_strings() -> None:
    a = pa.array(["x", "y"]).dictionary_encode()
    b = pa.array(["y", "z", None]).dictionary_encode()
    c = Codes.of(pa.chunked_array([a, b]))
    assert c.values.tolist() == ["x", "y", "z"]
    assert c.strings().tolist() == ["x", "y", "y", "z", ""]
    plain = Codes.of(pa.array(["q", None, "p"]))
    assert plain.values.tolist() == ["p", "q"] and plain.codes.tolist() == [1, -1, 0]
    assert len(Codes.of(pa.chunked_array([], pa.string()))) == 0


def test_array_helpers() -> None:
    assert ints(pa.array([1, None, 3])).tolist() == [1, -1, 3]
    assert ints(pa.chunked_array([[1], [None]]), 0).tolist() == [1, 0]
    assert bools(pa.array([True, None, False])).tolist() == [True, False, False]
    assert strings(pa.array(["a", None]).dictionary_encode()).tolist() == ["a", ""]


def _doc() -> dict[str, Any]:
    """step > module annotation > python frame > aten::linear > aten::addmm > launch -> kernel."""

    def x(name: str, cat: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
        ev: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid}
        ev.update(ts=ts, dur=dur)
        if args:
            ev["args"] = args
        return ev

    return {
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100", "computeMajor": 8}],
        "traceEvents": [
            x("ProfilerStep#0", "user_annotation", 0, 100),
            x("Block", "user_annotation", 1, 90),
            x("model.py(3): forward", "python_function", 2, 80),
            x("aten::linear", "cpu_op", 3, 60, **{"Input Dims": [[2, 3]], "Input type": ["float"]}),
            x("aten::addmm", "cpu_op", 4, 50),
            x("cudaLaunchKernel", "cuda_runtime", 5, 10, correlation=7),
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                "pid": 0,
                "tid": 7,
                "ts": 20,
                "dur": 30,
                "args": {"correlation": 7},
            },
            x("aten::empty", "cpu_op", 70, 5),
        ],
    }


def _rows(trace: Trace) -> dict[str, int]:
    names = strings(trace.events.column("name")).tolist()
    return {n: i for i, n in enumerate(names)}


def test_op_tree_skips_python_frames() -> None:
    trace = load_document(_doc())
    ix = trace.index
    assert ix is trace.index  # cached on the trace
    r = _rows(trace)
    tp = ix.tree_parent
    assert tp[r["aten::linear"]] == r["Block"]  # the Python frame is skipped
    assert tp[r["aten::addmm"]] == r["aten::linear"]
    assert tp[r["Block"]] == r["ProfilerStep#0"] and tp[r["ProfilerStep#0"]] == -1
    assert ix.depth[r["aten::addmm"]] == 3
    assert ix.is_leaf[r["aten::addmm"]] and not ix.is_leaf[r["aten::linear"]]
    assert ix.self_ns[r["aten::addmm"]] == 40_000  # minus its launch call
    assert ix.op[r["gemm"]] == r["aten::addmm"] and ix.launch[r["gemm"]] == r["cudaLaunchKernel"]
    dev = np.zeros(ix.n, dtype=np.int64)
    dev[r["aten::addmm"]] = 5
    total = ix.subtree_sum(dev)
    assert total[r["ProfilerStep#0"]] == total[r["aten::linear"]] == 5
    assert ix.is_work.tolist() == [n == "gemm" for n in _rows(trace)]
    assert ix.in_steps((0, 0)).all() and not ix.in_steps((1, 2)).any()
    sh = ix.shapes
    code = sh.code[r["aten::linear"]]
    assert sh.dims[code] == "[[2,3]]" and sh.types[code] == '["float"]'
    assert sh.code[r["aten::addmm"]] == -1


def _renumbered(trace: Trace) -> Trace:
    """The same events under other ids (not row positions), rows shuffled."""
    ev = trace.events
    n = ev.num_rows
    rng = np.random.default_rng(3)
    new_id = np.arange(n, dtype=np.int64) * 7 + 1000
    perm = rng.permutation(n)
    cols = {}
    for name in ev.column_names:
        col = ev.column(name)
        if name in ("id", "parent_id", "op_id", "launch_id"):
            old = ints(col)
            mapped = np.where(old >= 0, new_id[np.maximum(old, 0)], -1)
            col = pa.array(mapped, pa.int64(), mask=old < 0)
        cols[name] = col.take(pa.array(perm))
    return Trace(pa.table(cols, schema=ev.schema), trace.meta)


def test_ids_that_are_not_rows_give_the_same_tables() -> None:
    trace = load_document(_doc())
    other = _renumbered(trace)
    assert trace.index.contiguous and not other.index.contiguous
    assert other.index.rows_of(np.array([1000, 1007, 5, -1])).tolist()[2:] == [-1, -1]

    def by_name(t: pa.Table) -> list[dict[str, Any]]:
        t = t.drop_columns(
            [c for c in ("id", "parent_op", "op_id", "launch_id") if c in t.column_names]
        )
        return sorted(t.to_pylist(), key=lambda d: (d["start_ns"], str(d["name"])))

    assert by_name(build_ops(other.index)) == by_name(build_ops(trace.index))
    assert by_name(build_kernels(other.index)) == by_name(build_kernels(trace.index))
    # the links still name the right events
    ops = build_ops(other.index)
    names = dict(zip(ops.column("id").to_pylist(), ops.column("name").to_pylist(), strict=True))
    child = ops.filter(pc.equal(ops.column("name").cast(pa.string()), "aten::addmm"))
    assert names[child.column("parent_op")[0].as_py()] == "aten::linear"


def test_build_tables_from_an_events_table() -> None:
    trace = load_document(_doc())
    assert build_ops(trace.events).equals(trace.ops)
    assert build_kernels(trace.events).equals(trace.kernels)


def test_kernel_launch_by_correlation_without_launch_ids() -> None:
    trace = load_document(_doc())
    bare = trace.events.drop_columns(["launch_id"])
    k = build_kernels(bare)
    assert k.column("launch_id").to_pylist() == trace.kernels.column("launch_id").to_pylist()
    assert k.column("op_name").to_pylist() == ["aten::addmm"]


@pytest.mark.parametrize("n", [0])
def test_empty_index(n: int) -> None:
    trace = load_document({"traceEvents": []})
    ix = EventIndex(trace.events)
    assert ix.n == n and ix.contiguous
    assert ix.tree_parent.tolist() == [] and ix.shapes.dims == []
    assert ix.rows_of(np.array([1])).tolist() == [-1]
    assert build_ops(ix).num_rows == 0 and build_kernels(ix).num_rows == 0


def test_shape_texts_decode_only_what_they_cannot_prove(monkeypatch: pytest.MonkeyPatch) -> None:
    import opscope.trace.argtexts as index_module

    decoded: list[str | None] = []
    real = index_module._decode_shape

    def counting(text: str | None) -> tuple[str | None, str | None]:
        decoded.append(text)
        return real(text)

    monkeypatch.setattr(index_module, "_decode_shape", counting)
    shape_texts(pa.array(SHAPE_TEXTS, pa.string()))
    plain = SHAPE_TEXTS[3:8]
    assert not set(plain) & set(decoded)
    assert SHAPE_TEXTS[-2] not in decoded  # long but shallow
    assert SHAPE_TEXTS[-3] in decoded and SHAPE_TEXTS[13] in decoded


def _reference_string(text: str | None, key: str) -> str | None:
    if not text:
        return None
    try:
        value = orjson.loads(text.lstrip(", "))
    except orjson.JSONDecodeError:
        return None
    got = value.get(key) if isinstance(value, dict) else None
    return got if isinstance(got, str) else None


STRING_TEXTS = [
    None,
    "",
    '{"model_name":"neff_1.neff","neuron":{"id":"7"}}',
    '{"exec_id":1,"model_name":"","x":2}',
    '{"neuron":{"model_name":"inner"},"model_name":"outer"}',  # the key twice
    '{"neuron":{"model_name":"inner"}}',  # only nested
    '{"a":[1,{"b":2}],"model_name":"m"}',  # something opens before the key
    '{"model_name":5}',
    '{"model_name":null}',
    '{"model_name":"caf\\u00e9"}',
    '{"model_name":"m","big":1e400}',
    ', {"model_name":"m"}',
]


def test_top_level_strings_are_sure_only_where_orjson_agrees() -> None:
    from opscope.trace.argtexts import top_level_strings

    values, sure = top_level_strings(pa.array(STRING_TEXTS, pa.string()), "model_name")
    for text, got, ok in zip(STRING_TEXTS, values.tolist(), sure.tolist(), strict=True):
        if ok:
            assert got == _reference_string(text, "model_name"), text
    assert sure[[0, 1, 2, 3, 7, 8]].all()
    assert not sure[[4, 6, 9, 10, 11]].any()


INT_TEXTS = [
    None,
    "",
    '{"bytes":4096,"memory bandwidth (GB/s)":1.5}',
    '{"device":0,"bytes":-7}',
    '{"x":{"bytes":1},"bytes":2}',  # the key twice
    '{"x":{"bytes":1}}',  # only nested
    '{"a":[1,{"b":2}],"bytes":3}',  # something opens before the key
    '{"bytes":"4096"}',  # a string: left to the decoder
    '{"bytes":4.5}',
    '{"bytes":true}',
    '{"bytes":null}',
    '{"bytes":1234567890123456789012}',  # past 18 digits
    '{"bytes":12}',
    '{"other":1}',
    '{"bytes":8,"big":1e400}',
]


def test_top_level_ints_are_sure_only_where_orjson_agrees() -> None:
    from opscope.trace.argtexts import top_level_ints

    values, has, sure = top_level_ints(pa.array(INT_TEXTS, pa.string()), "bytes")
    for text, got, there, ok in zip(INT_TEXTS, values.tolist(), has, sure, strict=True):
        if not ok:
            continue
        value = orjson.loads(text).get("bytes") if text else None
        plain = isinstance(value, int) and not isinstance(value, bool)
        assert there == plain, text
        assert got == (value if plain else 0), text
    assert sure[[0, 1, 2, 3, 12, 13]].all()
    assert values[[2, 3, 12]].tolist() == [4096, -7, 12]
    assert not sure[[4, 5, 6, 7, 8, 9, 10, 11, 14]].any()  # any other value: the decoder's


def test_inverse_links() -> None:
    trace = load_document(_doc())
    ix = trace.index
    r = _rows(trace)
    assert ix.pointing_at("launch", r["cudaLaunchKernel"]).tolist() == [r["gemm"]]
    assert sorted(ix.pointing_at("op", r["aten::addmm"]).tolist()) == sorted(
        [r["aten::addmm"], r["cudaLaunchKernel"], r["gemm"]]
    )
    under_block = [r["model.py(3): forward"], r["aten::linear"], r["aten::empty"]]
    assert ix.pointing_at("tree_parent", r["Block"]).tolist() == under_block


def _chunked(trace: Trace, pieces: int = 3) -> pa.Table:
    """The trace's event table cut into ``pieces`` record batches (as the reader's batches)."""
    ev = trace.events
    n = ev.num_rows
    cuts = np.linspace(0, n, pieces + 1).astype(int)
    return pa.Table.from_batches(
        [b for a, z in itertools.pairwise(cuts.tolist()) for b in ev.slice(a, z - a).to_batches()],
        schema=ev.schema,
    )


def test_times_and_ids_are_views_of_the_table_not_copies() -> None:
    """A trace keeps ``id``/``start_ns``/``dur_ns`` in one chunk each, and the index reads them
    in place (8 bytes an event each not held twice); other columns keep their chunks."""
    trace = load_document(_doc())
    chunked = _chunked(trace)
    assert chunked.column("start_ns").num_chunks == 3
    again = Trace(chunked, trace.meta)
    ev = again.events
    assert [ev.column(c).num_chunks for c in ("id", "start_ns", "dur_ns")] == [1, 1, 1]
    assert ev.column("name").num_chunks == 3 and ev.equals(trace.events)
    ix = again.index
    for name, col in (("ids", "id"), ("start", "start_ns"), ("dur", "dur_ns")):
        arr = getattr(ix, name)
        buf = ev.column(col).chunk(0).buffers()[1]
        assert not arr.flags.owndata and not arr.flags.writeable, name
        assert arr.ctypes.data == buf.address + ev.column(col).chunk(0).offset * 8, name
        assert arr.tolist() == ints(trace.events.column(col)).tolist()
    # a table made some other way (several chunks) still reads, as a copy of its chunks
    direct = EventIndex(chunked)
    chunk_at = {c.buffers()[1].address + c.offset * 8 for c in chunked.column("start_ns").chunks}
    assert direct.start.ctypes.data not in chunk_at
    assert direct.start.tolist() == ix.start.tolist()
    assert direct.end.tolist() == ix.end.tolist()


def test_one_rank_is_one_value_and_ranks_are_each_event_s() -> None:
    trace = load_document(_doc())
    ix = trace.index
    assert ix.rank.strides == (0,) and ix.rank.tolist() == [0] * ix.n
    ranks = np.arange(ix.n, dtype=np.int32) % 2 + 3
    ev = trace.events.set_column(
        trace.events.schema.get_field_index("rank"), "rank", pa.array(ranks, pa.int32())
    )
    two = EventIndex(ev).rank
    assert two.dtype == np.int64 and two.tolist() == ranks.tolist()
    # the op tree's counts, computed on each use, agree with the kept arrays
    assert (ix.self_ns == ix.dur - ix.child_dur).all()
    assert ix.is_leaf.tolist() == (ix.in_tree & (ix.tree_children == 0)).tolist()
