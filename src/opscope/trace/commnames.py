"""Naming of communication: which device kernels are collectives, of which library, and which
collective a kernel or a host op names.

A profiler trace says what a kernel *is* only through its name.  :data:`COMM_PATTERNS` is the
table of the names communication libraries give their kernels, one row per pattern: the
library family, a compiled regular expression, and the collective the name implies (``None``
when the name does not say, as NCCL's ``ncclDevKernel_Generic`` which runs whatever work the
host queued).  The first row that matches decides.  Collectives are normalised to
:data:`COLLECTIVES`.

Patterns are matched against the kernel's *identifier* (:func:`kernel_identifier`): the
qualified name without return type, template arguments and parameters, with ``(anonymous
namespace)`` dropped, so ``void deep_ep::intranode::dispatch<8, 768>(int4*, ...)`` is matched as
``deep_ep::intranode::dispatch``.  A namespace therefore counts only when it qualifies the kernel
itself, not when one of its types appears in another kernel's template arguments.

Families and where their names come from (the library's own kernel sources):

``nccl``
    NVIDIA NCCL (and RCCL, which keeps NCCL's kernel names).  Every era: NCCL <= 2.7
    ``ncclAllReduceRingLLKernel_sum_f32``, ``ncclSendRecvKernel_copy_i8``; 2.8-2.18
    ``ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)``, ``ncclKernel_SendRecv_...``;
    2.19+ ``ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)`` and the
    generic ``ncclDevKernel_Generic`` / ``ncclDevKernel_Generic_4`` (collective not named).
    Any other ``nccl...Kernel`` identifier is NCCL's too (collective not named).
``rccl``
    AMD RCCL's own kernels (``rcclGenericKernel``); its NCCL-named ones are ``nccl``.
``msccl``
    MSCCL inside RCCL: ``mscclKernel_Sum_float_LL``.
``mscclpp``
    Microsoft MSCCL++: kernels in namespace ``mscclpp::``.
``c10d_symm_mem``
    PyTorch symmetric memory (``torch/csrc/distributed/c10d/symm_mem``): kernels in namespaces
    ``c10d::symmetric_memory::`` (``multimem_all_reduce_kernel``, ``one_shot_all_reduce_kernel``,
    ``two_shot_all_reduce_kernel``, ``multimem_all_gather_kernel``, ``barrier_kernel``,
    ``put_signal_kernel``...) and ``c10d::nvshmem_extension::`` (``allToAllV``...); the
    ``multimem_*`` / ``one_shot_all_reduce`` / ``two_shot_all_reduce`` names without namespace.
``custom_allreduce``
    Hand-written all-reduce kernels of inference engines: vLLM's custom all-reduce (also in
    SGLang and AMD aiter) ``vllm::cross_device_reduce_1stage`` / ``_2stage``; vLLM's ROCm quick
    all-reduce, namespace ``quickreduce::``; TensorRT-LLM's (and FlashInfer's copy)
    ``oneShotAllReduceKernel`` / ``twoShotAllReduceKernel`` and
    ``allreduce_fusion_kernel_oneshot_lamport``...
``deepep``
    DeepEP expert-parallel all-to-all: kernels in ``deep_ep::intranode::``,
    ``deep_ep::internode::``, ``deep_ep::internode_ll::`` (``notify_dispatch``, ``dispatch``,
    ``cached_notify_combine``, ``combine``, ``barrier``, ``clean_low_latency_buffer``...).
    ``deep_ep::layout::get_dispatch_layout`` only counts tokens on the device: not comm.
    The same structure under any other namespace is DeepEP's too (builds rename it): a
    kernel whose identifier ends ``intranode::``, ``internode::`` or ``internode_ll::`` then a
    name holding ``dispatch``, ``combine`` or ``notify`` (``my_ep::internode::combine``), or
    ``barrier``.
``pplx``
    Perplexity's pplx-kernels all-to-all: ``pplx::`` kernels that dispatch or combine
    (``pplx::dispatchKernel``, ``pplx::combineKernel``).
``nvshmem``
    NVIDIA NVSHMEM's own kernels: identifiers starting ``nvshmem`` (``nvshmemi_*``,
    ``nvshmemx_*``).  NVSHMEM reductions reach every PE: ``reduce`` is an all-reduce.
``te_userbuffers``
    Transformer Engine's userbuffers (tensor-parallel communication overlap):
    ``userbuffers_fp16_sum_inplace_gpu_rr_rs`` (``_rs``: reduce-scatter, ``_ag``: all-gather),
    ``kuserbuffers_pullsend``, ``kuserbuffers_pushrecv``...
``hccl``
    Huawei HCCL on Ascend: tasks ``hcom_allReduce__590_0_1``, ``hcom_broadcast_...`` and
    ``Hccl*`` names.
``oneccl``
    Intel oneCCL / PyTorch XCCL: identifiers starting ``ccl_``, ``oneccl``, ``xccl`` or in
    namespace ``ccl::`` / ``oneccl::`` / ``xccl::``.
``neuron``
    AWS Neuron hardware events: ``cc_running`` (collective execution).  The Neuron readers class
    it themselves (``trace.neuron.schema.HW_COMM``); ``cc_exec_barrier`` (a core waiting at a
    collective barrier) is left an annotation there and here.
``aiu``
    IBM AIU (Spyre) RDMA transfers between cards: ``SenRdmaSend_82227 [sync=AllReduce_all_\
    reduce_4_s0_r1_0] DmaO`` and ``SenRdmaReceive_82229 [524288B] [sync=...] DmaI`` (the
    categories :mod:`opscope.trace.formats.aiu` gives them make them kernels).  Matched on
    the whole name (its last word is the DMA direction, not an identifier); the collective is
    the one the ``[sync=...]`` tag names, else ``send`` / ``recv``.
``gloo``
    Gloo, PyTorch's CPU backend: its work runs on host threads and is recorded as ``gloo:*``
    ranges (``gloo:all_reduce``, ``gloo:broadcast``).  Host rows (:func:`is_host_comm`), never a
    device kernel.

``user``
    The user's own patterns (in-house libraries): regular expressions searched in the whole
    kernel name, from ``OPSCOPE_COMM_KERNELS`` (one per line; ``--comm-kernels REGEX`` on the
    command line, :func:`add_comm_kernels` in Python: :mod:`opscope.trace.commuser`).  They
    are tried first; the collective is the first collective word the name holds, else None.
    The trace cache keys on them.

Decision on bare collective words: a kernel whose name only *contains* ``all_reduce``,
``allgather``, ``reduce_scatter``... outside these libraries is not communication.  Compute
kernels are named after the collective they prepare (``mylib::all_reduce_cast_fp32``, a cast
before an all-reduce), reductions are called ``reduce_kernel`` and warp-level reductions
``WarpAllReduce``.  (The substring rule this table replaces classed all of those as comm.)

Host side, :func:`collective_of_host_op` reads the names PyTorch records around a collective:
c10d ops (``c10d::allreduce_``, ``c10d::_allgather_base_``...), functional collectives
(``_c10d_functional::all_gather_into_tensor``), process-group ranges (``nccl:all_reduce``,
``gloo:broadcast``, ``nccl:send 0->1``) and the ``Collective name`` that
``record_param_comms`` carries (``allreduce``, ``_reduce_scatter_base``, ``all_to_allv``...);
:func:`is_wait` the waits among them (``wait``, ``_c10d_functional::wait_tensor``).  This is the
one vocabulary of collectives: the classification of events (``kind`` ``comm``, the host's
communication ops) and the collective records (:mod:`opscope.analysis.collectives`) both read
names through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache

from opscope.trace.commuser import USER_ENV, add_comm_kernels, check_pattern, user_patterns  # noqa: F401 - public names here too

COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send",
    "recv",
    "send_recv",
    "barrier",
    "gather",
    "scatter",
)

FAMILIES: tuple[str, ...] = (
    "nccl",
    "rccl",
    "msccl",
    "mscclpp",
    "c10d_symm_mem",
    "custom_allreduce",
    "deepep",
    "pplx",
    "nvshmem",
    "te_userbuffers",
    "hccl",
    "oneccl",
    "neuron",
    "aiu",
    "gloo",
    "user",
)


@dataclass(frozen=True, slots=True)
class CommPattern:
    """One row of the table.

    ``needles``: lower-case texts one of which every name the row matches contains (a cheap
    test before the regex); ``device`` is False for host-side communication work (Gloo);
    ``whole``: the regex is matched against the whole name, not its identifier.  The regex
    is compiled on its first use (a trace meets the rows of one or two libraries; compiling
    all of them cost every process a few milliseconds)."""

    family: str
    needles: tuple[str, ...]
    pattern: str
    collective: str | None
    device: bool = True
    whole: bool = False
    flags: int = 0

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled(self.pattern, self.flags)


@cache
def _compiled(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# Collective words as the libraries spell them, most specific first (``reduce_scatter`` before
# ``reduce``, ``send_recv`` before ``send``); matched case-insensitively.
_WORDS: tuple[tuple[str, str], ...] = (
    ("reduce_scatter", r"reduce_?scatter"),
    ("all_reduce", r"all_?reduce"),
    ("all_gather", r"all_?gather"),
    ("all_to_all", r"all_?to_?all"),
    ("broadcast", r"broadcast|bcast"),
    ("send_recv", r"send_?recv"),
    ("barrier", r"barrier"),
    ("reduce", r"reduce"),
    ("gather", r"gather"),
    ("scatter", r"scatter"),
    ("send", r"send"),
    ("recv", r"recv|receive"),
)
# the collectives proper (no point-to-point, no rooted ones), for libraries that name only these
_COLL_WORDS = _WORDS[:5]
# NCCL's kernel spelling of each collective, most specific first.
_NCCL_WORDS: tuple[tuple[str, str], ...] = (
    ("all_reduce", "AllReduce"),
    ("all_gather", "AllGather"),
    ("reduce_scatter", "ReduceScatter"),
    ("all_to_all", "AllToAll"),
    ("broadcast", "Broadcast"),
    ("reduce", "Reduce"),
    ("send_recv", "SendRecv"),
    ("send", "Send"),
    ("recv", "Recv"),
)
_NVSHMEM_WORDS: tuple[tuple[str, str], ...] = (
    ("reduce_scatter", r"reduce_?scatter"),
    ("all_to_all", r"all_?to_?all"),
    ("all_gather", r"f?collect|all_?gather"),
    ("broadcast", r"broadcast|bcast"),
    ("barrier", r"barrier|sync_all"),
    ("all_reduce", r"reduce"),
)
_USERBUFFERS_WORDS: tuple[tuple[str, str], ...] = (
    ("reduce_scatter", r"_rs(?![a-z])"),
    ("all_gather", r"_ag(?![a-z])"),
    ("send_recv", r"send_?recv"),
    ("send", r"send"),
    ("recv", r"recv"),
)
_EP_WORDS: tuple[tuple[str, str], ...] = (
    ("all_to_all", r"dispatch|combine"),
    ("barrier", r"barrier"),
)


def _row(
    family: str,
    needle: str | tuple[str, ...],
    pattern: str,
    collective: str | None,
    *,
    flags: int = 0,
    device: bool = True,
) -> CommPattern:
    needles = (needle,) if isinstance(needle, str) else needle
    return CommPattern(family, needles, pattern, collective, device, flags=flags)


def _named(
    family: str,
    needle: str | tuple[str, ...],
    prefix: str,
    words: tuple[tuple[str, str], ...] = _WORDS,
    *,
    catch_all: bool = True,
    device: bool = True,
) -> tuple[CommPattern, ...]:
    """Rows for a library whose names start with ``prefix``: one per collective word found in
    the rest of the identifier, then (``catch_all``) the prefix alone, collective not named."""
    rows = [
        _row(family, needle, rf"{prefix}[\w:]*?(?:{w})", c, flags=re.I, device=device)
        for c, w in words
    ]
    if catch_all:
        rows.append(_row(family, needle, prefix, None, flags=re.I, device=device))
    return tuple(rows)


def _aiu() -> tuple[CommPattern, ...]:
    """IBM AIU RDMA transfers: the collective the ``[sync=...]`` tag names, else the
    direction."""
    rows = [
        CommPattern(
            "aiu",
            ("senrdma",),
            rf"^SenRdma(?:Send|Receive).*?\[sync=[^\]]*?(?:{w})",
            c,
            whole=True,
            flags=re.I,
        )
        for c, w in _COLL_WORDS
    ]
    rows.append(CommPattern("aiu", ("senrdma",), r"^SenRdmaSend", "send", whole=True))
    rows.append(CommPattern("aiu", ("senrdma",), r"^SenRdmaReceive", "recv", whole=True))
    return tuple(rows)


def _nccl() -> tuple[CommPattern, ...]:
    # ncclKernel_W / ncclDevKernel_W / ncclDevKernelDebug_W (2.8+); ncclWRingLLKernel (<= 2.7)
    rows = [
        _row(
            "nccl",
            "nccl",
            rf"^nccl(?:[A-Za-z]*Kernel[A-Za-z]*_{w}(?![a-z])|{w}[A-Za-z0-9]*Kernel)",
            c,
        )
        for c, w in _NCCL_WORDS
    ]
    rows.append(_row("nccl", "nccl", r"^nccl[A-Za-z0-9]*Kernel", None))
    return tuple(rows)


_OWN = r"(?:^|::)"  # the identifier itself, in whatever namespace
# an expert-parallel kernel's scope, in whatever namespace (DeepEP's structure)
_EP_SCOPE = r"(?:^|::)(?:intranode|internode|internode_ll)::"
_EP_NEEDLES = ("internode", "intranode")

COMM_PATTERNS: tuple[CommPattern, ...] = (
    *_nccl(),
    _row("rccl", "rccl", r"^rccl[A-Za-z0-9_]*Kernel", None),
    _row("msccl", "msccl", r"^mscclKernel", None),
    *_named("mscclpp", "mscclpp::", r"^mscclpp::", _COLL_WORDS),
    *_named(
        "c10d_symm_mem",
        "c10d::symmetric_memory::",
        r"^c10d::symmetric_memory::",
        (*_COLL_WORDS, ("barrier", "barrier")),
    ),
    *_named(
        "c10d_symm_mem",
        "c10d::nvshmem_extension::",
        r"^c10d::nvshmem_extension::",
        (("all_to_all", r"all_?to_?all"),),
    ),
    _row("c10d_symm_mem", "multimem_", rf"{_OWN}multimem_(?:one_shot_)?all_reduce", "all_reduce"),
    _row("c10d_symm_mem", "multimem_", rf"{_OWN}multimem_all_gather", "all_gather"),
    _row("c10d_symm_mem", "shot_all_reduce", rf"{_OWN}(?:one|two)_shot_all_reduce", "all_reduce"),
    _row(
        "custom_allreduce", "cross_device_reduce_", rf"{_OWN}cross_device_reduce_\w", "all_reduce"
    ),
    _row("custom_allreduce", "quickreduce::", r"^quickreduce::", "all_reduce"),
    _row(
        "custom_allreduce", "shotallreduce", rf"{_OWN}(?:one|two)ShotAllReduceKernel", "all_reduce"
    ),
    _row("custom_allreduce", "allreduce_fusion", rf"{_OWN}allreduce_fusion_kernel", "all_reduce"),
    *_named("deepep", "deep_ep::", r"^deep_ep::(?:intranode|internode|internode_ll)::", _EP_WORDS),
    # the same kernels under a build's own namespace: the structure, not the name
    _row(
        "deepep",
        _EP_NEEDLES,
        rf"{_EP_SCOPE}(?!\w*layout)\w*(?:dispatch|combine|notify)",
        "all_to_all",
    ),
    _row("deepep", _EP_NEEDLES, rf"{_EP_SCOPE}\w*barrier", "barrier"),
    *_named("pplx", "pplx::", r"^pplx::", _EP_WORDS[:1], catch_all=False),
    *_named("nvshmem", "nvshmem", rf"{_OWN}nvshmem", _NVSHMEM_WORDS),
    *_named("te_userbuffers", "userbuffers_", rf"{_OWN}k?userbuffers_", _USERBUFFERS_WORDS),
    *_named("hccl", ("hcom_", "hccl"), r"^(?:hcom_|hccl)"),
    *_named("oneccl", "ccl", r"^(?:oneccl|xccl|ccl)(?:::|_)"),
    _row("neuron", "cc_running", r"^cc_running$", None),
    *_aiu(),
    *_named("gloo", "gloo:", r"^gloo:", device=False),
)


def kernel_identifier(name: str) -> str:
    """The qualified identifier of a (demangled) kernel name: no return type, template
    arguments, parameters or ``(anonymous namespace)``.

    ``void c10d::symmetric_memory::(anonymous namespace)::one_shot_all_reduce_kernel<float,
    8>(float**, ...)`` -> ``c10d::symmetric_memory::one_shot_all_reduce_kernel``."""
    text = name.replace("(anonymous namespace)::", "")
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    ident = "".join(out).strip()
    return ident.rsplit(None, 1)[-1] if ident else ident


# the rows' distinct needles (a few dozen): most names hold none, and one pass says so
_NEEDLES = tuple(dict.fromkeys(n for r in COMM_PATTERNS for n in r.needles))


@lru_cache(maxsize=64)
def _user_rows(text: str) -> tuple[CommPattern, ...]:
    rows = []
    for regex in (r for r in text.splitlines() if r.strip()):
        if check_pattern(regex) is not None:
            continue
        rows.append(CommPattern("user", (), regex, None, whole=True))
    return tuple(rows)


def _word_collective(name: str) -> str | None:
    for collective, word in _WORDS:
        if re.search(word, name, re.I):
            return collective
    return None


def match(name: str) -> CommPattern | None:
    """The first row that matches ``name`` (the user's patterns, then
    :data:`COMM_PATTERNS`), or None."""
    return _match(name, user_patterns())


@lru_cache(maxsize=65536)
def _match(name: str, user: str) -> CommPattern | None:
    for row in _user_rows(user) if user else ():
        if row.regex.search(name):
            return CommPattern("user", (), row.pattern, _word_collective(name), whole=True)
    low = name.lower()
    if not any(n in low for n in _NEEDLES):
        return None
    rows = [r for r in COMM_PATTERNS if any(n in low for n in r.needles)]
    if not rows:
        return None
    ident = kernel_identifier(name)
    for row in rows:
        if row.regex.search(name if row.whole else ident):
            return row
    return None


def is_comm_kernel(name: str) -> bool:
    """Whether a device kernel of this name is communication (a device row matches)."""
    row = match(name)
    return row is not None and row.device


def is_host_comm(name: str) -> bool:
    """Whether a host event of this name is communication work done on the CPU (Gloo's
    ``gloo:*`` ranges)."""
    row = match(name)
    return row is not None and not row.device


def comm_family(name: str) -> str | None:
    """The library family (:data:`FAMILIES`) of a communication name, or None."""
    row = match(name)
    return None if row is None else row.family


def collective_of(name: str) -> str | None:
    """The collective (:data:`COLLECTIVES`) a communication name implies, None when the name
    does not say or is not communication."""
    row = match(name)
    return None if row is None else row.collective


# -- host side -------------------------------------------------------------------------------

#: Host ops of the collectives: c10d ops and functional collectives.
OP_PREFIXES: tuple[str, ...] = ("c10d::", "_c10d_functional::", "c10d_functional::")
#: Process-group ranges by backend: nested in the host op (``nccl:``, ``hccl:``) or on the
#: backend's own thread (``gloo:``).
RANGE_PREFIXES: tuple[str, ...] = ("nccl:", "gloo:", "ucc:", "mpi:", "xccl:", "hccl:")
#: Backends whose range is the work itself (CPU backends); an NCCL range on the host thread
#: only enqueues the kernel.
WORK_RANGE_PREFIXES: tuple[str, ...] = ("gloo:", "mpi:", "ucc:")
#: The op PyTorch records around a collective with its parameters in ``args``.
PARAM_COMMS = "record_param_comms"
#: Point-to-point collectives: a send on one rank pairs with a recv on another.
P2P_TYPES = frozenset({"send", "recv", "send_recv"})
#: Collectives whose size is the same on every rank of the group.
SAME_SIZE_TYPES = frozenset(
    {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "barrier"}
)
#: The spelling of a work's wait (no communication): ``wait``, ``wait_tensor``.
WAIT = "wait"

# Variants of one collective, cut from the compact spelling: in-place/out-of-place,
# flat-tensor, coalesced, single-tensor.
_HOST_SUFFIXES = ("coalesced", "intotensor", "tensor", "base", "oop", "single", "inplace")
# compact spelling (lower case, no underscores, variants cut) -> collective
_HOST_COLLECTIVES: dict[str, str] = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherv": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescatterv": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallv": "all_to_all",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send",
    "recv": "recv",
    "recvanysource": "recv",
    "sendrecv": "send_recv",
    "barrier": "barrier",
    "monitoredbarrier": "barrier",
}


@lru_cache(maxsize=4096)
def host_spelling(name: str) -> str:
    """The compact spelling of a host-side collective name: the c10d or backend prefix cut,
    its first word up to a ``(``, lower case, no underscores, variant suffixes
    (``_coalesced``, ``_into_tensor``, ``_base``, ``_oop``...) cut until the spelling is a
    known one (``c10d::_allgather_base_`` -> ``allgather``; ``nccl:send 0->1`` -> ``send``).
    "" for a name in another namespace (``aten::gather``) or none left (``nccl:``)."""
    text = name.strip()
    for prefix in OP_PREFIXES + RANGE_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    else:
        if ":" in text:
            return ""
    text = text.split(None, 1)[0] if text.strip() else ""
    compact = text.split("(", 1)[0].lower().replace("_", "")
    cut = True
    while cut and compact not in _HOST_COLLECTIVES and compact != WAIT:
        cut = False
        for suffix in _HOST_SUFFIXES:
            if compact.endswith(suffix) and len(compact) > len(suffix):
                compact = compact[: -len(suffix)]
                cut = True
    return compact


def collective_of_host_op(name: str) -> str | None:
    """The collective (:data:`COLLECTIVES`) a host-side op or range names:
    ``c10d::allreduce_`` and ``nccl:all_reduce`` -> ``all_reduce``; ``c10d::_allgather_base_``
    -> ``all_gather``; ``nccl:send 0->1`` -> ``send``; a ``record_param_comms`` ``Collective
    name`` without prefix (``_reduce_scatter_base`` -> ``reduce_scatter``).  None for anything
    else: another namespace (``aten::gather``), waits (``_c10d_functional::wait_tensor``: see
    :func:`is_wait`), set-up (``init``, ``split``)."""
    return _HOST_COLLECTIVES.get(host_spelling(name))


def is_wait(name: str) -> bool:
    """Whether a host-side name is a work's wait (``wait``, ``_c10d_functional::wait_tensor``,
    a ``record_param_comms`` of ``Collective name`` ``wait``): no communication."""
    return host_spelling(name) == WAIT
