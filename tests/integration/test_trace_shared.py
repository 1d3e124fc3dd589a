"""Every trace under ../shared/traces loads with the counts and links a separate, deliberately
simple script counted (full-document json.load with exact decimals, brute-force containment).

The expected values below were produced by that script, not by opscope; regenerate them only
by re-running such a script, never from opscope's own output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from opscope.errors import TraceError
from opscope.trace import load

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"

pytestmark = pytest.mark.shared

# rows: X events + B/E pairs; kernel: events of category "kernel"; corr_linked: device events
# (not device annotations) whose correlation matches a runtime call; with_op: of those, the
# ones whose runtime call lies inside a cpu_op/user_annotation (not ProfilerStep) on its
# thread (counted for small traces only); first: the first such kernel (name prefix, ts as
# written) and the innermost op around its launch.
EXPECTED = {
    "cpu/rank_not_found.json.gz": {
        "corr_linked": 0,
        "first": None,
        "kernel": 0,
        "rows": 2467,
        "with_op": 0,
    },
    "cuda/a100_cudagraph_rank0_of16.json.gz": {
        "corr_linked": 6875,
        "first": None,
        "kernel": 6080,
        "rows": 67217,
        "with_op": None,
    },
    "cuda/a100_nccl_rank0_of2.json.gz": {
        "corr_linked": 3774,
        "first": (
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, ",
            "4458676983543.183",
            "aten::cudnn_batch_norm_backward",
        ),
        "kernel": 2700,
        "rows": 26933,
        "with_op": 3774,
    },
    "cuda/critical_path_alexnet.json.gz": {
        "corr_linked": 139,
        "first": (
            "void at::native::(anonymous namespace)::distribution_element",
            "1695835573023613",
            "aten::uniform_",
        ),
        "kernel": 79,
        "rows": 868,
        "with_op": 138,
    },
    "cuda/critical_path_event_sync.json.gz": {
        "corr_linked": 9,
        "first": (
            "void at::native::vectorized_elementwise_kernel<4, at::native",
            "1707417525512145",
            "aten::fill_",
        ),
        "kernel": 4,
        "rows": 33,
        "with_op": 5,
    },
    "cuda/critical_path_event_sync_multi_stream.json.gz": {
        "corr_linked": 11,
        "first": ("ampere_sgemm_128x64_nn", "1712867402348700", "aten::mm"),
        "kernel": 3,
        "rows": 57,
        "with_op": 9,
    },
    "cuda/critical_path_simple_add.json.gz": {
        "corr_linked": 139,
        "first": (
            "void at::native::(anonymous namespace)::distribution_element",
            "1694039994139246",
            "aten::uniform_",
        ),
        "kernel": 79,
        "rows": 838,
        "with_op": 138,
    },
    "cuda/cupti_counters.json.gz": {
        "corr_linked": 0,
        "first": None,
        "kernel": 0,
        "rows": 2324,
        "with_op": 0,
    },
    "cuda/dataloader_pair/resnet50_workers0.pt.trace.json.gz": {
        "corr_linked": 9282,
        "first": None,
        "kernel": 9564,
        "rows": 54320,
        "with_op": None,
    },
    "cuda/dataloader_pair/resnet50_workers4.pt.trace.json.gz": {
        "corr_linked": 9048,
        "first": None,
        "kernel": 9456,
        "rows": 48892,
        "with_op": None,
    },
    "cuda/diff_pair/control_a100.json.gz": {
        "corr_linked": 9450,
        "first": None,
        "kernel": 8568,
        "rows": 74937,
        "with_op": None,
    },
    "cuda/diff_pair/test_v100.json.gz": {
        "corr_linked": 15018,
        "first": None,
        "kernel": 9876,
        "rows": 68324,
        "with_op": None,
    },
    "cuda/et_pair/linear_kineto.json.gz": {
        "corr_linked": 10356,
        "first": None,
        "kernel": 8716,
        "rows": 61950,
        "with_op": None,
    },
    "cuda/et_pair/simple_add_kineto.json.gz": {
        "corr_linked": 4,
        "first": (
            "void at::native::(anonymous namespace)::distribution_element",
            "1689360808083239",
            "aten::uniform_",
        ),
        "kernel": 4,
        "rows": 56,
        "with_op": 4,
    },
    "cuda/gpu_user_annotation.json.gz": {
        "corr_linked": 140,
        "first": (
            "void at::native::vectorized_elementwise_kernel<4, at::native",
            "1672876799191106",
            "aten::fill_",
        ),
        "kernel": 130,
        "rows": 984,
        "with_op": 140,
    },
    "cuda/kineto_docs_after_fix.json": {
        "corr_linked": 1,
        "first": ("Kernel", "88511388202.785", "op1"),
        "kernel": 1,
        "rows": 9,
        "with_op": 1,
    },
    "cuda/kineto_docs_before_fix.json": {
        "corr_linked": 1,
        "first": ("Kernel", "88437691101.749", "op1"),
        "kernel": 1,
        "rows": 9,
        "with_op": 1,
    },
    "cuda/no_distributed_info.json.gz": {
        "corr_linked": 0,
        "first": None,
        "kernel": 0,
        "rows": 2467,
        "with_op": 0,
    },
    "cuda/ns_resolution.pt.trace.json.gz": {
        "corr_linked": 6095,
        "first": None,
        "kernel": 4350,
        "rows": 45420,
        "with_op": None,
    },
    "cuda/sampled_world128/rank0.json.gz": {
        "corr_linked": 1204,
        "first": (
            "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, in",
            "1682725898082228",
            "fbgemm::permute_sparse_features",
        ),
        "kernel": 1154,
        "rows": 4811,
        "with_op": 1204,
    },
    "cuda/sampled_world128/rank1.json.gz": {
        "corr_linked": 1154,
        "first": (
            "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, in",
            "1682725898082381",
            "fbgemm::permute_sparse_features",
        ),
        "kernel": 1104,
        "rows": 4676,
        "with_op": 1154,
    },
    "cuda/triton_example.json.gz": {
        "corr_linked": 1,
        "first": (
            "triton_poi_fused_add_cos_sin_0",
            "2413669097444.592",
            "triton_poi_fused_add_cos_sin_0",
        ),
        "kernel": 1,
        "rows": 8,
        "with_op": 1,
    },
    "mtia/mtia_inference_rank0.json.gz": {
        "corr_linked": 991,
        "first": None,
        "kernel": 0,
        "rows": 14179,
        "with_op": 112,
    },
    "odd/ibm_aiu_allreduce_uint64.json": {
        "corr_linked": 0,
        "first": None,
        "kernel": 0,
        "rows": 28,
        "with_op": 0,
    },
    "odd/large_integer.pt.trace.json.gz": {
        "corr_linked": 0,
        "first": None,
        "kernel": 1,
        "rows": 2,
        "with_op": 0,
    },
    "rocm/mi210_gpu_only.json.gz": {
        "corr_linked": 562,
        "first": None,
        "kernel": 562,
        "rows": 1194,
        "with_op": 0,
    },
    "rocm/mi250_minitoy_train.json.gz": {
        "corr_linked": 16,
        "first": (
            "void at::native::elementwise_kernel<128, 2, at::native::gpu_",
            "4203669603771.648",
            "aten::addmm",
        ),
        "kernel": 14,
        "rows": 113,
        "with_op": 16,
    },
    "rocm/mi300x_models/bert_small.json.gz": {
        "corr_linked": 61,
        "first": (
            "void at::native::(anonymous namespace)::indexSelectLargeInde",
            "2204338330237.582",
            "aten::index_select",
        ),
        "kernel": 60,
        "rows": 2133,
        "with_op": 61,
    },
    "rocm/mi300x_models/falconsai_nsfw.json.gz": {
        "corr_linked": 155,
        "first": ("SubTensorOpWithScalar1d", "2199280223674.156", "aten::miopen_convolution"),
        "kernel": 155,
        "rows": 4097,
        "with_op": 155,
    },
    "rocm/mi300x_models/owlv2_large.json.gz": {
        "corr_linked": 4340,
        "first": None,
        "kernel": 4255,
        "rows": 103247,
        "with_op": None,
    },
    "rocm/mi300x_models/qwen1.5_0.5b_chat.json.gz": {
        "corr_linked": 1054,
        "first": (
            "void at::native::(anonymous namespace)::indexSelectLargeInde",
            "2241346141130.849",
            "aten::index_select",
        ),
        "kernel": 1516,
        "rows": 12112,
        "with_op": 1054,
    },
    "rocm/mi300x_models/timesformer.json.gz": {
        "corr_linked": 449,
        "first": None,
        "kernel": 447,
        "rows": 47228,
        "with_op": None,
    },
    "rocm/mi300x_resnet_act_checkpoint_rank0_of8.json.gz": {
        "corr_linked": 2685,
        "first": None,
        "kernel": 2995,
        "rows": 49208,
        "with_op": None,
    },
    "rocm/sglang_graph/capture_traces/bs_32_rank0.json.gz": {
        "corr_linked": 2,
        "first": (
            "void at::native::vectorized_elementwise_kernel<4, at::native",
            "4909733316061.579",
            "aten::fill_",
        ),
        "kernel": 2,
        "rows": 59135,
        "with_op": 2,
    },
    "rocm/sglang_qwen3_8b_decode.json.gz": {
        "corr_linked": 558,
        "first": (
            "void at::native::(anonymous namespace)::multi_tensor_apply_k",
            "4909914679597.053",
            "aten::_foreach_copy_",
        ),
        "kernel": 555,
        "rows": 1471,
        "with_op": 558,
    },
    "rocm/torch_compile_triton.json.gz": {
        "corr_linked": 12,
        "first": (
            "triton_red_fused_add_mean_mul_pow_rsqrt_0",
            "3603029046460.717",
            "triton_red_fused_add_mean_mul_pow_rsqrt_0",
        ),
        "kernel": 12,
        "rows": 115,
        "with_op": 12,
    },
    "rocm/vllm_graph/capture_traces/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz": {
        "corr_linked": 10,
        "first": (
            "void at::native::vectorized_elementwise_kernel<4, at::native",
            "6520430065016.281",
            "aten::fill_",
        ),
        "kernel": 7,
        "rows": 126861,
        "with_op": 10,
    },
    "rocm/vllm_graph/graph_execution.json.gz": {
        "corr_linked": 434,
        "first": (
            "void at::native::unrolled_elementwise_kernel<at::native::CUD",
            "6520618861901.761",
            "aten::sub",
        ),
        "kernel": 425,
        "rows": 1539,
        "with_op": 434,
    },
}

# the same bytes as rocm/sglang_qwen3_8b_decode.json.gz, beside its capture (counted on its
# own: the same counts)
EXPECTED["rocm/sglang_graph/graph_execution.json.gz"] = EXPECTED[
    "rocm/sglang_qwen3_8b_decode.json.gz"
]

ET_FILES = {"cuda/et_pair/linear_et.json.gz", "cuda/et_pair/simple_add_et.json.gz"}
# TraceLens's execution_details.json beside graph capture traces: no events, refused as such
# (and left out of a folder of traces)
CAPTURE_DETAILS = {
    "rocm/sglang_graph/capture_traces/execution_details.json",
    "rocm/vllm_graph/capture_traces/execution_details.json",
}


def _need_shared() -> None:
    if not SHARED.is_dir():
        pytest.skip("../shared/traces not present (a user's clone)")


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def _all_files() -> list[str]:
    if not SHARED.is_dir():
        return sorted(EXPECTED) + sorted(ET_FILES) + sorted(CAPTURE_DETAILS)
    found = sorted(
        str(p.relative_to(SHARED))
        for p in SHARED.rglob("*.json*")
        if "tracelens_reference" not in str(p)
    )
    return found


def _q(t: Any, sql: str) -> Any:
    return t.sql(sql).column(0).to_pylist()[0]


@pytest.mark.parametrize("rel", _all_files())
def test_shared_trace(rel: str) -> None:
    _need_shared()
    path = SHARED / rel
    if rel in ET_FILES:
        with pytest.raises(TraceError, match="execution trace"):
            load(path, cache=False)
        return
    if rel in CAPTURE_DETAILS:
        with pytest.raises(TraceError, match=r"capture details .* not a trace"):
            load(path, cache=False)
        assert load(path.parent, cache=False).meta.paths == [
            str(p) for p in sorted(path.parent.glob("*.json.gz"))
        ]
        return
    assert rel in EXPECTED, f"a new shared trace: count it by hand and add it ({rel})"
    exp = EXPECTED[rel]
    t = load(path, cache=False)
    assert len(t) == exp["rows"]
    assert _q(t, "SELECT count(*) FROM events WHERE lower(cat) = 'kernel'") == exp["kernel"]
    linked = _q(
        t,
        "SELECT count(*) FROM events d JOIN events r ON d.launch_id = r.id "
        "WHERE d.source = 'device' AND d.kind != 'annotation' AND d.correlation = r.correlation",
    )
    assert linked == exp["corr_linked"]
    if exp["with_op"] is not None:
        with_op = _q(
            t,
            "SELECT count(*) FROM events d JOIN events r ON d.launch_id = r.id "
            "WHERE d.source = 'device' AND d.kind != 'annotation' "
            "AND d.correlation = r.correlation AND r.op_id IS NOT NULL",
        )
        assert with_op == exp["with_op"]
    if exp["first"] is not None:
        prefix, ts_text, op_name = exp["first"]
        base = t.meta.base_time_ns or 0
        whole, _, frac = ts_text.partition(".")
        start = base + int(whole) * 1000 + int((frac + "000")[:3])
        got = (
            t.sql(
                "SELECT o.name FROM events k JOIN events o ON k.op_id = o.id "
                f"WHERE k.start_ns = {start} AND starts_with(k.name, $$%s$$)" % prefix
            )
            .column(0)
            .to_pylist()
        )
        assert got == [op_name]
    # links point inside the table and the right way
    n = len(t)
    for col in ("parent_id", "op_id", "launch_id"):
        values = t.events.column(col)
        assert pc.min(values).as_py() in (None, *range(n))
        assert (pc.max(values).as_py() or 0) < n
    assert (
        _q(
            t,
            "SELECT count(*) FROM events e JOIN events r ON e.launch_id = r.id "
            "WHERE e.source != 'device' OR r.source != 'runtime'",
        )
        == 0
    )


def test_ns_resolution_keeps_every_nanosecond() -> None:
    _need_shared()
    t = load(SHARED / "cuda/ns_resolution.pt.trace.json.gz", cache=False)
    # written as "ts": 1712195495519695.812, "dur": 53.090 (beyond what a double holds)
    got = t.sql(
        "SELECT start_ns, dur_ns FROM events WHERE name = 'DivBackward1' "
        "AND start_ns = 1712195495519695812"
    ).to_pylist()
    assert got == [{"start_ns": 1712195495519695812, "dur_ns": 53090}]
    odd = t.sql("SELECT count(*) FROM events WHERE start_ns % 1000 != 0").column(0)
    assert odd.to_pylist()[0] > 40000  # sub-µs digits everywhere, not rounded away


def test_large_integers() -> None:
    _need_shared()
    t = load(SHARED / "odd/large_integer.pt.trace.json.gz", cache=False)
    args = t.sql("SELECT args FROM events WHERE name = 'record_param_comms'").column(0)
    assert '"Comms Id":10159970886766084423' in args.to_pylist()[0]
    ibm = load(SHARED / "odd/ibm_aiu_allreduce_uint64.json", cache=False)
    assert len(ibm) == 28
    assert "15514734831341844875" in ibm.column("tid")
    # B at 2097962447511.067, E at 2097962448599.869 (µs): exactly 1088802 ns
    d = (
        ibm.sql(
            "SELECT dur_ns FROM events WHERE tid = '15514734831341844875' "
            "AND start_ns = 2097962447511067"
        )
        .column(0)
        .to_pylist()
    )
    assert d == [1088802]


def test_graph_launches_link_many_kernels() -> None:
    _need_shared()
    t = load(SHARED / "rocm/vllm_graph/graph_execution.json.gz", cache=False)
    n = _q(
        t,
        "SELECT count(*) FROM events k JOIN events r ON k.launch_id = r.id "
        "WHERE r.name = 'hipGraphLaunch' AND k.cat = 'kernel'",
    )
    assert n == 421  # kernels carrying the graph launch's correlation, counted by hand
    a100 = load(SHARED / "cuda/a100_cudagraph_rank0_of16.json.gz", cache=False)
    g = _q(
        a100,
        "SELECT count(*) FROM events k JOIN events r ON k.launch_id = r.id "
        "WHERE r.name = 'cudaGraphLaunch' AND k.cat = 'kernel'",
    )
    assert g == 135


def test_string_pids_and_metadata() -> None:
    _need_shared()
    t = load(SHARED / "cuda/a100_cudagraph_rank0_of16.json.gz", cache=False)
    assert "Spans" in t.column("pid")
    assert t.meta.distributed_info is not None and t.meta.distributed_info["rank"] == 0
    assert t.meta.rank_origin == {0: "distributedInfo"}
    assert len(t.meta.device_properties) == 8
    assert t.device.kind == "cuda"
    r = load(SHARED / "rocm/mi300x_models/bert_small.json.gz", cache=False)
    assert r.device.kind == "rocm"
    assert r.meta.base_time_ns == 1751410836000000000 or r.meta.base_time_ns is not None


def test_folder_of_ranks_in_parallel() -> None:
    _need_shared()
    t = load(SHARED / "cuda/sampled_world128", cache=False)
    assert t.meta.ranks == [0, 1]
    assert t.meta.rank_origin == {0: "distributedInfo", 1: "distributedInfo"}
    assert len(t) == 4811 + 4676


def test_cache_reopen_is_faster() -> None:
    _need_shared()
    import time

    path = SHARED / "cuda/a100_nccl_rank0_of2.json.gz"
    t0 = time.perf_counter()
    first = load(path)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = load(path)
    warm = time.perf_counter() - t0
    assert again.meta.cached and again.events.equals(first.events)
    print(f"cold {cold:.3f}s warm {warm:.3f}s ratio {cold / warm:.1f}")
    assert warm < cold  # the ratio is reported by benchmarks/ingest.py, not asserted here


@pytest.mark.parametrize("rel", sorted(set(_all_files()) - ET_FILES))
def test_typed_decoder_matches_dicts(rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The typed decoder (structs, raw args) gives the dict decoder's table on every trace,
    and reads every run of them itself (none handed to the dict decoder)."""
    from opscope.trace.kineto import file as kineto_file
    from trace_checks import assert_same_parse, count_typed, parse_dict_only

    _need_shared()
    path = SHARED / rel
    count = count_typed(monkeypatch)
    typed, _ = kineto_file.parse_file(path, workers=0)
    plain = parse_dict_only(path, monkeypatch)
    assert count.typed and not count.refused
    assert_same_parse(typed, plain)


@pytest.mark.parametrize("rel", sorted(set(_all_files()) - ET_FILES))
def test_c_scanner_matches_typed_and_dicts(rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C scanner reads every run of every shared trace itself and gives the typed
    decoder's table (``args`` text included) and the dict decoder's."""
    from opscope.trace import native
    from opscope.trace.kineto import file as kineto_file
    from trace_checks import assert_same_parse, count_native, parse_dict_only, parse_typed_only

    _need_shared()
    if not native.AVAILABLE:
        pytest.skip("the C scanner is not built (no C compiler at install)")
    path = SHARED / rel
    count = count_native(monkeypatch)
    scanned, _ = kineto_file.parse_file(path, workers=0)
    assert count.typed and not count.refused
    assert_same_parse(scanned, parse_typed_only(path, monkeypatch), same_args_text=True)
    assert_same_parse(scanned, parse_dict_only(path, monkeypatch))
