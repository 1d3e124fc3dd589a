"""opscope compare of one program recorded on CUDA and on HIP: runtime calls spelled per vendor
are matched (the sync is in both, not resolved and new) and shown as recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_findings_kit import Doc

from opscope.analysis.diff import _match_findings, _pair_names, diff_reports
from opscope.analysis.pipeline import analyze
from opscope.cli.main import main

CUDA = {"sync": "cudaDeviceSynchronize", "launch": "cudaLaunchKernel", "copy": "cudaMemcpyAsync"}
HIP = {"sync": "hipDeviceSynchronize", "launch": "hipLaunchKernel", "copy": "hipMemcpyAsync"}


def _doc(api: dict[str, str], gemm: str, gemm_us: float) -> dict[str, Any]:
    """4 steps: a matmul, an explicit device sync after it, then the host prepares the next
    work for 300 µs while the device idles; a CPU scalar copied inside aten::add."""
    d = Doc()
    t = 0.0
    for i in range(4):
        d.step(i, t, 1000)
        d.op("aten::mm", t + 10, 20)
        d.launch(t + 12, 5, gemm, t + 30, gemm_us, runtime=api["launch"])
        d.runtime(api["sync"], t + 40, gemm_us - 5)
        d.op("aten::add", t + 400, 60)
        d.op("aten::to", t + 402, 50)
        d.op("aten::copy_", t + 404, 45)
        d.launch(
            t + 405,
            40,
            "Memcpy HtoD (Pageable -> Device)",
            t + 420,
            2,
            cat="gpu_memcpy",
            runtime=api["copy"],
            bytes=4,
        )
        d.op("aten::relu", t + 700, 10)
        d.launch(t + 702, 5, "relu_kernel", t + 710, 50, runtime=api["launch"])
        t += 1000
    doc = d.doc()
    if api is HIP:
        doc["deviceProperties"] = [
            {"id": 0, "name": "AMD Instinct MI300X", "gcnArchName": "gfx942"}
        ]
    else:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100", "computeMajor": 9}]
    return doc


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "h100.json", tmp_path / "mi300x.json"
    a.write_text(json.dumps(_doc(CUDA, "sm90_xmma_gemm_f32f32", 300)))
    b.write_text(json.dumps(_doc(HIP, "Cijk_Ailk_Bljk_SB_MT64x64", 250)))
    return a, b


def test_sync_in_both_traces_is_matched_not_resolved_and_new(pair: tuple[Path, Path]) -> None:
    ra, rb = analyze(pair[0]), analyze(pair[1])
    assert ra.trace.device.kind == "cuda" and rb.trace.device.kind == "rocm"
    calls_a = [f["details"]["call"] for f in ra.findings if f["kind"] == "sync_stalls"]
    calls_b = [f["details"]["call"] for f in rb.findings if f["kind"] == "sync_stalls"]
    assert calls_a == ["cudaDeviceSynchronize"] and calls_b == ["hipDeviceSynchronize"]
    d = diff_reports(ra, rb)
    f = d["findings"]
    assert d["cross_device"] is True
    assert not [x for x in f["resolved"] + f["new"] if x["kind"] == "sync_stalls"]
    (m,) = [x for x in f["matched"] if x["kind"] == "sync_stalls"]
    assert m["renamed"] is True
    assert "cudaDeviceSynchronize / hipDeviceSynchronize" in m["title"]
    # each side as recorded
    assert "cudaDeviceSynchronize" in m["a"]["title"] and "hip" not in m["a"]["title"]
    assert "hipDeviceSynchronize" in m["b"]["title"]
    assert m["delta_time_at_stake_us"] == pytest.approx(
        m["b"]["time_at_stake_us"] - m["a"]["time_at_stake_us"]
    )
    persisting = [x for x in f["persisting"] if x["kind"] == "sync_stalls"]
    assert [x["details"]["call"] for x in persisting] == ["hipDeviceSynchronize"]
    # the scalar copy (keyed by its op) is in both as well
    assert [x["kind"] for x in f["matched"] if x["kind"] == "h2d_copies"] == ["h2d_copies"]
    assert len(f["matched"]) == len(f["persisting"])
    assert len(f["resolved"]) + len(f["matched"]) == len(ra.findings)
    assert len(f["new"]) + len(f["matched"]) == len(rb.findings)


def test_compare_cli_shows_both_spellings(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(pair[0]), str(pair[1])]) == 0
    out = capsys.readouterr().out
    assert "in both: " in out and "cudaDeviceSynchronize / hipDeviceSynchronize" in out
    assert "resolved: 4 × cudaDeviceSynchronize" not in out
    assert "new: 4 × hipDeviceSynchronize" not in out
    assert main(["compare", str(pair[0]), str(pair[1]), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert not [x for x in data["findings"]["new"] if x["kind"] == "sync_stalls"]


def test_same_vendor_pair_matches_as_before(pair: tuple[Path, Path]) -> None:
    ra = analyze(pair[0])
    d = diff_reports(ra, ra)
    f = d["findings"]
    assert f["resolved"] == [] and f["new"] == []
    assert [x["id"] for x in f["persisting"]] == [x["id"] for x in ra.findings]
    assert not any(m["renamed"] for m in f["matched"])
    assert all(m["delta_time_at_stake_us"] == 0 for m in f["matched"])
    assert not any("names" in r for r in d["ops"] + d["kernels"])


def test_names_left_over_on_both_sides_pair_by_runtime_key() -> None:
    pairs = _pair_names(
        {"aten::mm", "cudaLaunchKernel", "gemm_a"}, {"aten::mm", "hipLaunchKernel", "gemm_b"}
    )
    assert sorted(pairs, key=str) == sorted(
        [
            ("aten::mm", "aten::mm"),
            ("cudaLaunchKernel", "hipLaunchKernel"),
            ("gemm_a", None),
            (None, "gemm_b"),
        ],
        key=str,
    )
    # two A names with one key: ambiguous, left unpaired
    pairs = _pair_names({"cudaLaunchKernel", "cudaLaunchKernelExC"}, {"hipLaunchKernel"})
    assert all(x is None or y is None for x, y in pairs) and len(pairs) == 3


def test_findings_of_one_subject_pair_in_rank_order() -> None:
    def h2d(fid: str, scope: str) -> dict[str, Any]:
        return {
            "id": fid,
            "kind": "h2d_copies",
            "title": f"copies by aten::to in {scope}",
            "details": {"op": "aten::to", "scope": scope},
        }

    # two findings on one subject in A, one in B: the first pair up, the second is resolved
    resolved, new, matched = _match_findings([h2d("F1", "x"), h2d("F2", "y")], [h2d("F4", "x")])
    assert [x["id"] for x in resolved] == ["F2"] and new == []
    assert [(x["id"], y["id"]) for x, y in matched] == [("F1", "F4")]


def test_a_figure_only_one_side_has_gets_no_delta_either_way() -> None:
    """a with communication, b without (its exposed_comm_us is null): no crash, a null delta
    for what b lacks, real deltas for the rest, in both directions."""
    from distjobs import nccl_rank_doc
    from mcp_traces import hostile_doc
    from opscope.trace import load_document

    comm = analyze(load_document(nccl_rank_doc(0, 2)))
    plain = analyze(load_document(hostile_doc()))
    s_comm, s_plain = comm.to_dict()["summary"], plain.to_dict()["summary"]
    assert s_comm["exposed_comm_us"] is not None
    assert s_plain.get("exposed_comm_us") is None
    for a, b, sa, sb in ((comm, plain, s_comm, s_plain), (plain, comm, s_plain, s_comm)):
        d = diff_reports(a, b)["timeline_delta"]
        assert d["wall_us"] == pytest.approx(sb["wall_us"] - sa["wall_us"])
        if a is comm:
            assert d["exposed_comm_us"] is None
