"""Vendor-neutral keys of runtime API names (CUDA runtime and driver, HIP)."""

from __future__ import annotations

import pytest

from opscope.analysis.runtime_names import (
    both_spellings,
    canonical,
    display,
    is_runtime_api,
    neutral_text,
    same_call,
)


@pytest.mark.parametrize(
    ("names", "key"),
    [
        (
            ["cudaDeviceSynchronize", "hipDeviceSynchronize", "cuCtxSynchronize"],
            "DeviceSynchronize",
        ),
        (
            ["cudaStreamSynchronize", "hipStreamSynchronize", "cuStreamSynchronize"],
            "StreamSynchronize",
        ),
        (["cudaEventSynchronize", "hipEventSynchronize"], "EventSynchronize"),
        (["cudaEventRecord", "hipEventRecord", "cuEventRecord"], "EventRecord"),
        (["cudaStreamWaitEvent", "hipStreamWaitEvent"], "StreamWaitEvent"),
        (
            [
                "cudaLaunchKernel",
                "cudaLaunchKernelExC_v11060",
                "cuLaunchKernel",
                "hipLaunchKernel",
                "hipExtLaunchKernel",
                "hipModuleLaunchKernel",
                "hipExtModuleLaunchKernel",
            ],
            "LaunchKernel",
        ),
        (["cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch"], "GraphLaunch"),
        (["cudaMemcpyAsync", "hipMemcpyAsync", "cuMemcpyAsync"], "MemcpyAsync"),
        (["cudaMemcpy", "hipMemcpy", "hipMemcpyWithStream"], "Memcpy"),
        (["cuMemcpyHtoDAsync_v2", "hipMemcpyHtoDAsync"], "MemcpyHtoDAsync"),
        (["cudaMemsetAsync", "hipMemsetAsync"], "MemsetAsync"),
        (["cudaMalloc", "hipMalloc", "cuMemAlloc_v2"], "Malloc"),
        (["cudaGetDeviceProperties_v2", "hipGetDevicePropertiesR0600"], "GetDeviceProperties"),
        (["cudaStreamGetCaptureInfo_v2", "hipStreamGetCaptureInfo"], "StreamGetCaptureInfo"),
    ],
)
def test_vendor_spellings_share_one_key(names: list[str], key: str) -> None:
    assert {canonical(n) for n in names} == {key}
    assert all(is_runtime_api(n) for n in names)
    assert same_call(names[0], names[-1])


@pytest.mark.parametrize(
    "name",
    [
        "aten::add",
        "cublasSgemm_v2",
        "cudnnConvolutionForward",
        "hipblasLtMatmul",
        "synchronize",
        "neuron_synchronize",
        "nrt_tensor_write",
        "Memcpy HtoD (Pageable -> Device)",
        "ampere_sgemm_128x64_nn",
    ],
)
def test_other_names_are_their_own_key(name: str) -> None:
    assert canonical(name) == name
    assert not is_runtime_api(name)


def test_different_calls_stay_apart() -> None:
    assert not same_call("cudaDeviceSynchronize", "hipStreamSynchronize")
    assert not same_call("cudaLaunchKernel", "cudaLaunchCooperativeKernel")
    assert not same_call("cudaMemcpy", "cudaMemcpyAsync")


def test_text_and_display() -> None:
    assert neutral_text("2 × hipDeviceSynchronize from aten::item") == (
        "2 × DeviceSynchronize from aten::item"
    )
    assert display("cudaDeviceSynchronize", "hipDeviceSynchronize") == (
        "cudaDeviceSynchronize / hipDeviceSynchronize"
    )
    assert display("aten::mm", "aten::mm") == "aten::mm"
    assert display(None, "aten::mm") == "aten::mm" and display("aten::mm", None) == "aten::mm"
    assert both_spellings("3 × hipDeviceSynchronize: idle", "3 × cudaDeviceSynchronize: idle") == (
        "3 × cudaDeviceSynchronize / hipDeviceSynchronize: idle"
    )
    # a call A does not have, or spells the same, is left alone
    assert both_spellings("hipEventSynchronize", "cudaDeviceSynchronize") == "hipEventSynchronize"
    assert both_spellings("cudaMemcpy", "cudaMemcpy") == "cudaMemcpy"
