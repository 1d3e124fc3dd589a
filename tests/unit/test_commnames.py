"""The table of communication names (trace.commnames) and ingest's use of it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from opscope.trace.commnames import (
    COLLECTIVES,
    COMM_PATTERNS,
    FAMILIES,
    collective_of,
    collective_of_host_op,
    comm_family,
    is_comm_kernel,
    is_host_comm,
    kernel_identifier,
    match,
)
from opscope.trace.kineto.classify import classify_table
from opscope.trace.schema import classify

# (recorded kernel name, family, collective): real-looking names of every row of the table
KERNELS: list[tuple[str, str, str | None]] = [
    # NCCL 2.8-2.18 (and RCCL, same names)
    (
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        "nccl",
        "all_reduce",
    ),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "nccl", "all_reduce"),
    ("ncclKernel_AllReduce", "nccl", "all_reduce"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "nccl", "all_gather"),
    ("ncclKernel_ReduceScatter_RING_SIMPLE_Sum_bfloat16(ncclWorkElem)", "nccl", "reduce_scatter"),
    (
        "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "nccl",
        "broadcast",
    ),
    ("ncclKernel_Reduce_RING_LL_Sum_float(ncclWorkElem)", "nccl", "reduce"),
    ("ncclKernel_SendRecv", "nccl", "send_recv"),
    (
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
        "nccl",
        "send_recv",
    ),
    # NCCL 2.19+
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl", "all_gather"),
    (
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "nccl",
        "all_reduce",
    ),
    (
        "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "nccl",
        "reduce_scatter",
    ),
    ("ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl", "reduce"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "nccl", "send_recv"),
    ("ncclDevKernel_Send(ncclDevKernelArgsStorage<4096ul>)", "nccl", "send"),
    ("ncclDevKernel_Recv(ncclDevKernelArgsStorage<4096ul>)", "nccl", "recv"),
    (
        "ncclDevKernel_AllToAllPivot_RING_SIMPLE(ncclDevKernelArgsStorage<4096ul>)",
        "nccl",
        "all_to_all",
    ),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "nccl", None),
    ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "nccl", None),
    # NCCL <= 2.7
    ("ncclAllReduceRingLLKernel_sum_f32(ncclColl)", "nccl", "all_reduce"),
    ("ncclAllReduceTreeLLKernel_sum_f16(CollectiveArgs*)", "nccl", "all_reduce"),
    ("ncclReduceScatterRingLLKernel_sum_f16(ncclColl)", "nccl", "reduce_scatter"),
    ("ncclBroadcastRingLLKernel_copy_i8(ncclColl)", "nccl", "broadcast"),
    ("ncclSendRecvKernel_copy_i8(ncclColl)", "nccl", "send_recv"),
    # RCCL, MSCCL, MSCCL++
    ("rcclGenericKernel(ncclDevComm*, unsigned long, ncclWork*)", "rccl", None),
    ("mscclKernel_Sum_float_LL(ncclDevComm*, mscclAlgo*, mscclWork*)", "msccl", None),
    (
        "void mscclpp::allreduce7<__half>(__half*, mscclpp::DeviceHandle<...>*)",
        "mscclpp",
        "all_reduce",
    ),
    (
        "void mscclpp::allgather6(void*, mscclpp::DeviceHandle<mscclpp::MemoryChannel>*)",
        "mscclpp",
        "all_gather",
    ),
    ("void mscclpp::reduceScatter<float>(float*, int)", "mscclpp", "reduce_scatter"),
    ("void mscclpp::allToAllKernel(void*, int)", "mscclpp", "all_to_all"),
    ("void mscclpp::broadcastKernel<int>(int*)", "mscclpp", "broadcast"),
    ("mscclpp::putPacketsKernel(void*, unsigned long)", "mscclpp", None),
    # PyTorch symmetric memory
    (
        (
            "void c10d::symmetric_memory::multimem_all_reduce_kernel<float, 8, 16>(float*, "
            "unsigned long)"
        ),
        "c10d_symm_mem",
        "all_reduce",
    ),
    (
        (
            "void c10d::symmetric_memory::(anonymous namespace)::one_shot_all_reduce_kernel<"
            "c10::BFloat16, 8>(c10::BFloat16**, unsigned long)"
        ),
        "c10d_symm_mem",
        "all_reduce",
    ),
    (
        (
            "void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 16, 8>(float**, "
            "unsigned long)"
        ),
        "c10d_symm_mem",
        "all_reduce",
    ),
    (
        "void c10d::symmetric_memory::multimem_all_gather_kernel<16>(char*, unsigned long)",
        "c10d_symm_mem",
        "all_gather",
    ),
    (
        "void c10d::symmetric_memory::reduce_scatter_kernel<float>(float**)",
        "c10d_symm_mem",
        "reduce_scatter",
    ),
    ("void c10d::symmetric_memory::all_to_all_kernel(void**)", "c10d_symm_mem", "all_to_all"),
    ("void c10d::symmetric_memory::broadcast_kernel(void**)", "c10d_symm_mem", "broadcast"),
    (
        "c10d::symmetric_memory::barrier_kernel(unsigned int**, unsigned long, unsigned long)",
        "c10d_symm_mem",
        "barrier",
    ),
    (
        "c10d::symmetric_memory::put_signal_kernel(unsigned int**, unsigned long)",
        "c10d_symm_mem",
        None,
    ),
    (
        "void c10d::nvshmem_extension::allToAllV(void*, void*, long*, long*)",
        "c10d_symm_mem",
        "all_to_all",
    ),
    (
        "void c10d::nvshmem_extension::exchangeSplitAndOffset(long*, long*, int)",
        "c10d_symm_mem",
        None,
    ),
    ("multimem_all_reduce_kernel", "c10d_symm_mem", "all_reduce"),
    ("multimem_one_shot_all_reduce_kernel<float>", "c10d_symm_mem", "all_reduce"),
    ("multimem_all_gather_kernel", "c10d_symm_mem", "all_gather"),
    ("one_shot_all_reduce_kernel", "c10d_symm_mem", "all_reduce"),
    ("two_shot_all_reduce_kernel<float, 16, 8>(float**)", "c10d_symm_mem", "all_reduce"),
    # custom all-reduce
    (
        (
            "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
            "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)"
        ),
        "custom_allreduce",
        "all_reduce",
    ),
    (
        "void vllm::cross_device_reduce_2stage<float, 4>(vllm::RankData*, vllm::RankSignals)",
        "custom_allreduce",
        "all_reduce",
    ),
    (
        "void sglang::cross_device_reduce_1stage<half, 8>(sglang::RankData*)",
        "custom_allreduce",
        "all_reduce",
    ),
    (
        (
            "void quickreduce::allreduce_prototype_twoshot<quickreduce::AllReduceTwoshot<"
            "__hip_bfloat16>>(__hip_bfloat16 const*)"
        ),
        "custom_allreduce",
        "all_reduce",
    ),
    (
        (
            "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>("
            "tensorrt_llm::kernels::AllReduceParams)"
        ),
        "custom_allreduce",
        "all_reduce",
    ),
    ("void twoShotAllReduceKernel<float, 4>(AllReduceParams)", "custom_allreduce", "all_reduce"),
    (
        (
            "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<"
            "half, 8>(AllReduceFusionParams)"
        ),
        "custom_allreduce",
        "all_reduce",
    ),
    # DeepEP
    (
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)",
        "deepep",
        "all_to_all",
    ),
    ("void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)", "deepep", "all_to_all"),
    (
        "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*)",
        "deepep",
        "all_to_all",
    ),
    (
        "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int)",
        "deepep",
        "all_to_all",
    ),
    ("void deep_ep::internode::dispatch<true, 2, 8>(int4*, float*)", "deepep", "all_to_all"),
    ("void deep_ep::internode_ll::combine<false>(void*, void*)", "deepep", "all_to_all"),
    ("void deep_ep::intranode::barrier<8>(int**, int)", "deepep", "barrier"),
    ("void deep_ep::internode_ll::clean_low_latency_buffer<32>(int*, int)", "deepep", None),
    # DeepEP's structure under a build's own namespace (or none)
    ("void moe_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)", "deepep", "all_to_all"),
    ("void moe_ep::internode_ll::combine<false>(void*, void*)", "deepep", "all_to_all"),
    ("void moe_ep::intranode::cached_notify_combine<8>(void**, int*, int)", "deepep", "all_to_all"),
    ("internode::notify_dispatch<true>(int*)", "deepep", "all_to_all"),
    ("void moe_ep::intranode::barrier<8>(int**, int)", "deepep", "barrier"),
    # pplx-kernels
    (
        "void pplx::dispatchKernel<__nv_bfloat16, __nv_bfloat16, false>(int*, unsigned long)",
        "pplx",
        "all_to_all",
    ),
    (
        "void pplx::(anonymous namespace)::combineKernel<float, __nv_bfloat16>(float*)",
        "pplx",
        "all_to_all",
    ),
    # NVSHMEM
    (
        "void nvshmemi_alltoall_on_stream_kernel<int>(int*, int const*, unsigned long)",
        "nvshmem",
        "all_to_all",
    ),
    ("nvshmemi_fcollect_on_stream_kernel<float>(float*)", "nvshmem", "all_gather"),
    (
        "void nvshmemi_reduce_kernel<float, (rdxn_ops)0>(float*, float const*)",
        "nvshmem",
        "all_reduce",
    ),
    ("nvshmemi_reducescatter_on_stream_kernel<float>(float*)", "nvshmem", "reduce_scatter"),
    ("nvshmemi_broadcast_on_stream_kernel<char>(char*)", "nvshmem", "broadcast"),
    ("nvshmemi_barrier_all_on_stream_kernel()", "nvshmem", "barrier"),
    ("nvshmemi_proxy_progress_kernel(int)", "nvshmem", None),
    # Transformer Engine userbuffers
    (
        "void userbuffers_fp16_sum_inplace_gpu_rr_rs<8>(int, int, int, int, int, int, void**)",
        "te_userbuffers",
        "reduce_scatter",
    ),
    (
        "void userbuffers_fp16_sum_inplace_gpu_rr_ag<4>(int, int, int)",
        "te_userbuffers",
        "all_gather",
    ),
    ("kuserbuffers_pushsendrecv(int*, int*, int4*)", "te_userbuffers", "send_recv"),
    ("kuserbuffers_pullsend(int, int, int*)", "te_userbuffers", "send"),
    ("kuserbuffers_pushrecv(int, int, int*)", "te_userbuffers", "recv"),
    ("void userbuffers_fp16_sum_inplace_gpu_rw<8>(int, int)", "te_userbuffers", None),
    # HCCL
    ("hcom_allReduce__590_0_1", "hccl", "all_reduce"),
    ("hcom_allGather__223_1_1", "hccl", "all_gather"),
    ("hcom_reduceScatter__17_0_1", "hccl", "reduce_scatter"),
    ("hcom_alltoallv__33_0_1", "hccl", "all_to_all"),
    ("hcom_broadcast__590_0_1", "hccl", "broadcast"),
    ("hcom_reduce__1_0_1", "hccl", "reduce"),
    ("hcom_send__12_0_1", "hccl", "send"),
    ("hcom_receive__12_0_1", "hccl", "recv"),
    ("hcom_barrier__1_0_1", "hccl", "barrier"),
    ("hcom_gather__2_0_1", "hccl", "gather"),
    ("hcom_scatter__2_0_1", "hccl", "scatter"),
    ("hcom_batchSendRecv__8_0_1", "hccl", "send_recv"),
    ("hcom_memcpy__1", "hccl", None),
    ("HcclReduceScatter", "hccl", "reduce_scatter"),
    ("HcclAllGather", "hccl", "all_gather"),
    ("HcclAlltoAllV", "hccl", "all_to_all"),
    ("HcclBroadcast", "hccl", "broadcast"),
    ("HcclBarrier", "hccl", "barrier"),
    ("HcclReduce", "hccl", "reduce"),
    ("HcclScatter", "hccl", "scatter"),
    ("HcclGather", "hccl", "gather"),
    ("HcclSend", "hccl", "send"),
    ("HcclRecv", "hccl", "recv"),
    ("HcclAllreduce", "hccl", "all_reduce"),
    ("HcclBatchSendRecv", "hccl", "send_recv"),
    # oneCCL / XCCL
    ("ccl_kernel_allreduce_float_sum", "oneccl", "all_reduce"),
    ("oneccl_allgatherv_kernel_bf16", "oneccl", "all_gather"),
    ("xccl::reduce_scatter_kernel<float>(float*)", "oneccl", "reduce_scatter"),
    ("ccl::v1::alltoall_kernel(void*)", "oneccl", "all_to_all"),
    ("ccl_bcast_kernel_int8", "oneccl", "broadcast"),
    ("ccl_kernel_sendrecv(void*)", "oneccl", "send_recv"),
    ("ccl_kernel_barrier()", "oneccl", "barrier"),
    ("ccl_kernel_reduce_float_sum(float*)", "oneccl", "reduce"),
    ("ccl::gather_kernel(void*)", "oneccl", "gather"),
    ("ccl::scatter_kernel(void*)", "oneccl", "scatter"),
    ("xccl_send_kernel(void*)", "oneccl", "send"),
    ("xccl_recv_kernel(void*)", "oneccl", "recv"),
    ("ccl_kernel_copy(void*)", "oneccl", None),
    # Neuron
    ("cc_running", "neuron", None),
    # IBM AIU RDMA transfers (a real trace's names): the collective of the [sync=...] tag
    ("SenRdmaSend_82227 [sync=AllReduce_all_reduce_4_s0_r1_0] DmaO", "aiu", "all_reduce"),
    (
        "SenRdmaReceive_82229 [524288B] [sync=AllReduce_all_reduce_4_s3_r0x7_6] DmaI",
        "aiu",
        "all_reduce",
    ),
    ("SenRdmaSend_82233 - Xseg to rank 0 [sync=AllReduce_x_s3_r0x7_6] DmaO", "aiu", "all_reduce"),
    ("SenRdmaSend_7 [sync=ReduceScatter_rs_2_s0_r1_0] DmaO", "aiu", "reduce_scatter"),
    ("SenRdmaReceive_8 [4096B] [sync=AllGather_ag_1_s1_r0_0] DmaI", "aiu", "all_gather"),
    ("SenRdmaSend_9 [sync=AllToAll_a2a_0_s0_r1_0] DmaO", "aiu", "all_to_all"),
    ("SenRdmaSend_10 [sync=Broadcast_bc_0_s0_r1_0] DmaO", "aiu", "broadcast"),
    ("SenRdmaSend_11 [sync=Send_p2p_0] DmaO", "aiu", "send"),
    ("SenRdmaReceive_12 [64B] DmaI", "aiu", "recv"),
]

# names no row may take: compute kernels named after reductions, gathers or collectives they
# prepare, generic dispatch/combine kernels, runtime calls, host ranges
NOT_COMM = [
    "reduce_kernel",
    # an expert-parallel build's layout kernel only counts tokens, in whatever namespace
    "void moe_ep::layout::get_dispatch_layout<256>(long*, int*)",
    "void moe_ep::internode::get_dispatch_layout<256>(long*, int*)",
    "void moe_ep::intranode::clean_buffer<32>(int*, int)",
    "softmax_warp_forward",
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
        "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, "
        "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float,"
        " 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
        "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda("
        "float, float)#1}>, unsigned int, float, 4>)"
    ),
    (
        "void at::native::_scatter_gather_elementwise_kernel<128, 4, "
        "at::native::_cuda_scatter_gather_internal_kernel<true, float>::operator()<"
        "at::native::ReduceAdd>(at::TensorIterator&, long, long, long, at::native::ReduceAdd "
        "const&)::{lambda(int)#1}>(int, at::native::_cuda_scatter_gather_internal_kernel<true, "
        "float>::operator()<at::native::ReduceAdd>(at::TensorIterator&, long, long, long, "
        "at::native::ReduceAdd const&)::{lambda(int)#1})"
    ),
    (
        "void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, "
        "long, long, long, bool)"
    ),
    (
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, false,"
        " false>(cublasLt::cublasSplitKParams<float>, float const*)"
    ),
    (
        "void paged_attention_ll4mi_reduce_kernel<__hip_bfloat16, __hip_bfloat16, 128>("
        "__hip_bfloat16*)"
    ),
    "dispatch",
    "combine_kernel",
    "void moe::dispatch<float>(float*)",
    "void sgl_kernel::combine<half>(half*)",
    # decision: a collective word in an unrelated namespace is not communication (a cast
    # before an all-reduce, a reduction helper), see the module's docstring
    "all_reduce_cast_fp32",
    "void mylib::all_reduce_cast_fp32<float>(float*, int)",
    "void apex::layer_norm_kernel<float, WarpAllReduce<float>>(float*)",
    (
        "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, "
        "bool*, int, int, int, int, int)"
    ),
    "void at::native::vectorized_elementwise_kernel<4, c10d::symmetric_memory::Functor>(int)",
    "cudaLaunchKernel",
    "ncclCommInitRank",
    "nccl:all_reduce",
    "c10d::allreduce_",
    "triton_poi_fused_add_0",
    "_combined_routing_compute",
    "cc_exec_barrier",
    # an AIU card's compute, also the reduction inside an all-reduce; a DMA that is no RDMA
    "add_11 Cmpt Exec",
    "AllReduce_all_reduce_4_Add_1 Cmpt Exec",
    "Dma DmaO",
    "",
]


@pytest.mark.parametrize(("name", "family", "collective"), KERNELS)
def test_comm_kernels(name: str, family: str, collective: str | None) -> None:
    assert is_comm_kernel(name)
    assert not is_host_comm(name)
    assert comm_family(name) == family
    assert collective_of(name) == collective


@pytest.mark.parametrize("name", NOT_COMM)
def test_not_comm(name: str) -> None:
    assert not is_comm_kernel(name)
    assert comm_family(name) is None
    assert collective_of(name) is None


def test_every_row_fires() -> None:
    """Each row of the table is the first match of at least one real-looking name above."""
    hit = {id(match(n)) for n, _, _ in KERNELS} | {id(match(n)) for n, _ in GLOO}
    missed = [(r.family, r.regex.pattern, r.collective) for r in COMM_PATTERNS if id(r) not in hit]
    assert not missed


def test_table_values() -> None:
    assert {r.family for r in COMM_PATTERNS} | {"user"} == set(FAMILIES)  # user: the user's
    assert all(r.collective is None or r.collective in COLLECTIVES for r in COMM_PATTERNS)
    assert all(n and n == n.lower() for r in COMM_PATTERNS for n in r.needles)


def test_kernel_identifier() -> None:
    assert kernel_identifier("void deep_ep::intranode::dispatch<8, 768>(int4*, float*)") == (
        "deep_ep::intranode::dispatch"
    )
    assert kernel_identifier(
        "void c10d::symmetric_memory::(anonymous namespace)::one_shot_all_reduce_kernel<float, "
        "8>(float**, unsigned long)"
    ) == ("c10d::symmetric_memory::one_shot_all_reduce_kernel")
    assert kernel_identifier("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)") == (
        "ncclDevKernel_Generic"
    )
    assert kernel_identifier("void f<g<(h)1>>(x)") == "f"
    assert kernel_identifier("ncclKernel_SendRecv") == "ncclKernel_SendRecv"
    assert kernel_identifier("") == ""


GLOO: list[tuple[str, str | None]] = [
    ("gloo:all_reduce", "all_reduce"),
    ("gloo:all_gather", "all_gather"),
    ("gloo:reduce_scatter", "reduce_scatter"),
    ("gloo:all_to_all", "all_to_all"),
    ("gloo:broadcast", "broadcast"),
    ("gloo:send_recv", "send_recv"),
    ("gloo:barrier", "barrier"),
    ("gloo:reduce", "reduce"),
    ("gloo:gather", "gather"),
    ("gloo:scatter", "scatter"),
    ("gloo:send", "send"),
    ("gloo:recv", "recv"),
    ("gloo:wait", None),
]


@pytest.mark.parametrize(("name", "collective"), GLOO)
def test_gloo_is_host_comm(name: str, collective: str | None) -> None:
    assert is_host_comm(name)
    assert not is_comm_kernel(name)  # Gloo's work is on the host, never a device kernel
    assert comm_family(name) == "gloo"
    assert collective_of(name) == collective


@pytest.mark.parametrize("name", ["nccl:all_reduce", "c10d::allreduce_", "aten::gather", "gloo"])
def test_not_host_comm(name: str) -> None:
    assert not is_host_comm(name)


@pytest.mark.parametrize(
    ("name", "collective"),
    [
        # c10d ops
        ("c10d::allreduce_", "all_reduce"),
        ("c10d::allreduce_coalesced_", "all_reduce"),
        ("c10d::allgather_", "all_gather"),
        ("c10d::_allgather_base_", "all_gather"),
        ("c10d::allgather_into_tensor_coalesced_", "all_gather"),
        ("c10d::reduce_scatter_", "reduce_scatter"),
        ("c10d::_reduce_scatter_base_", "reduce_scatter"),
        ("c10d::reduce_scatter_tensor_coalesced_", "reduce_scatter"),
        ("c10d::alltoall_", "all_to_all"),
        ("c10d::alltoall_base_", "all_to_all"),
        ("c10d::broadcast_", "broadcast"),
        ("c10d::reduce_", "reduce"),
        ("c10d::gather_", "gather"),
        ("c10d::scatter_", "scatter"),
        ("c10d::send", "send"),
        ("c10d::recv_", "recv"),
        ("c10d::recv_any_source_", "recv"),
        ("c10d::barrier", "barrier"),
        ("c10d::monitored_barrier_", "barrier"),
        # functional collectives
        ("_c10d_functional::all_reduce", "all_reduce"),
        ("_c10d_functional::all_reduce_", "all_reduce"),
        ("_c10d_functional::all_gather_into_tensor", "all_gather"),
        ("_c10d_functional::reduce_scatter_tensor", "reduce_scatter"),
        ("_c10d_functional::all_to_all_single", "all_to_all"),
        ("_c10d_functional::broadcast", "broadcast"),
        ("c10d_functional::all_reduce", "all_reduce"),
        # process-group ranges
        ("nccl:all_reduce", "all_reduce"),
        ("nccl:broadcast", "broadcast"),
        ("nccl:_all_gather_base", "all_gather"),
        ("nccl:_reduce_scatter_base", "reduce_scatter"),
        ("nccl:all_to_all", "all_to_all"),
        ("nccl:all_gather_into_tensor_coalesced", "all_gather"),
        ("nccl:_broadcast_oop", "broadcast"),
        ("nccl:send 0->1", "send"),
        ("nccl:recv 1<-0", "recv"),
        ("gloo:all_reduce", "all_reduce"),
        ("gloo:broadcast", "broadcast"),
        ("gloo:barrier", "barrier"),
        ("xccl:allreduce", "all_reduce"),
        # record_param_comms "Collective name"
        ("allreduce", "all_reduce"),
        ("allreduce_coalesced", "all_reduce"),
        ("allgather", "all_gather"),
        ("_allgather_base", "all_gather"),
        ("allgather_coalesced", "all_gather"),
        ("allgather_into_tensor_coalesced", "all_gather"),
        ("reduce_scatter", "reduce_scatter"),
        ("_reduce_scatter_base", "reduce_scatter"),
        ("reduce_scatter_tensor_coalesced", "reduce_scatter"),
        ("all_to_all", "all_to_all"),
        ("all_to_allv", "all_to_all"),
        ("broadcast", "broadcast"),
        ("_broadcast_oop", "broadcast"),
        ("reduce", "reduce"),
        ("_reduce_oop", "reduce"),
        ("send", "send"),
        ("recv", "recv"),
        ("recvAnySource", "recv"),
        ("barrier", "barrier"),
        ("gather", "gather"),
        ("scatter", "scatter"),
        # not collectives
        ("init", None),
        ("wait", None),
        ("split", None),
        ("coalesced", None),
        ("_c10d_functional::wait_tensor", None),
        ("c10d::_allgather_base_backward", None),
        ("aten::gather", None),
        ("aten::scatter_", None),
        ("aten::broadcast_to", None),
        ("record_param_comms", None),
        ("ReduceScatterBase_Req", None),
        ("", None),
        ("nccl:", None),
    ],
)
def test_collective_of_host_op(name: str, collective: str | None) -> None:
    assert collective_of_host_op(name) == collective


@pytest.mark.parametrize(
    "name",
    [n for n, _, _ in KERNELS if n != "cc_running"],
)
def test_classify_marks_comm_kernels(name: str) -> None:
    assert classify("kernel", name) == ("device", "comm")
    assert classify("cpu_op", name) == ("framework", "op")  # only device kernels


@pytest.mark.parametrize("name", [n for n in NOT_COMM if n])
def test_classify_leaves_compute_kernels(name: str) -> None:
    assert classify("kernel", name) == ("device", "kernel")


def test_classify_table_agrees_with_classify() -> None:
    rows = [("kernel", n) for n, _, _ in KERNELS] + [("kernel", n) for n in NOT_COMM]
    rows += [("cpu_op", KERNELS[0][0]), ("gpu_user_annotation", "nccl:all_reduce")]
    rows += [("kernel", KERNELS[0][0])]  # repeated names are classed alike
    table = pa.table(
        {
            "cat": [c for c, _ in rows],
            "name": [n for _, n in rows],
            "pid": ["1"] * len(rows),
            "tid": ["7"] * len(rows),
        }
    )
    kinds = classify_table(table).column("kind").to_pylist()
    assert kinds == [classify(c, n)[1] for c, n in rows]
    assert kinds.count("comm") == len(KERNELS) + 1


# -- an expert-parallel build's own namespace, the user's own patterns -------------------------


@pytest.mark.parametrize(
    ("name", "collective"),
    [(n, c) for n, f, c in KERNELS if n.count("deep_ep::") == 1 and c is not None],
)
def test_an_expert_parallel_build_with_a_renamed_namespace_is_communication(
    name: str, collective: str
) -> None:
    """The public DeepEP kernel names with the namespace a build gives them: still DeepEP's
    all-to-all (the MoE training trace's 113 ms of dispatch/combine/notify were compute)."""
    renamed = name.replace("deep_ep::", "ep_internal_v3::")
    assert is_comm_kernel(renamed) and comm_family(renamed) == "deepep"
    assert collective_of(renamed) == collective


def test_the_users_patterns_come_first(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from opscope.trace import commuser
    from opscope.trace.commuser import USER_ENV, add_comm_kernels

    name = "void acme::ring_allgather_xfer<4>(float*)"
    monkeypatch.setenv(USER_ENV, "")
    monkeypatch.setattr(commuser._PROCESS, "text", "")  # the process's, restored after
    assert not is_comm_kernel(name)
    add_comm_kernels(r"acme::\w+_xfer")
    assert os.environ[USER_ENV] == ""  # a setting of the process, not of its environment
    assert is_comm_kernel(name) and comm_family(name) == "user"
    assert collective_of(name) == "all_gather"
    assert not is_comm_kernel("void acme::gemm<4>(float*)")
    with pytest.raises(ValueError, match="not a regular expression"):
        add_comm_kernels("acme(")
