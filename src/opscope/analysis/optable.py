"""The key-averages table: one row per op name (and per op name + input shapes).

Computed from the exported trace (never from the live profiler object), so the same table comes
out of a trace recorded today, last year on a cluster, or on another vendor's device.

Columns (times in microseconds, like torch.profiler's tables):
``calls``, ``cpu_self_us``, ``cpu_total_us``, ``device_self_us`` (device time of the work the
op launched directly), ``device_total_us`` (with its child ops' launches), ``device_share``
(``device_self_us`` over all device time in the window), ``device_calls`` (device executions
launched directly).

On a CPU-only trace the device *is* the CPU, and :attr:`OpTable.device_is_host` says so.  The
device columns then hold the CPU execution of the ops that did the work: the self time of *leaf*
ops (no child ops) that compute - not of allocation/view ops, not of wrappers such as
``aten::linear`` or a compiled region, whose self time is dispatch overhead, exactly as such
wrappers have no device self time on a GPU.  ``device_total_us`` sums that over the op's subtree.
A table therefore never shows silently empty device columns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.analysis.graph_ops import mark_replayed
from opscope.markers import SYNC_ANNOTATION
from opscope.trace.arrays import Codes, valid
from opscope.trace.groupby import group_columns

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex
    from opscope.trace.model import Trace

SORT_KEYS = ("device_self_us", "device_total_us", "cpu_self_us", "cpu_total_us", "calls", "name")

# Framework bookkeeping: annotations and wrappers that are not work of the program itself.
# Excluded from the op table (the profiler step) and from counts of executed ops on the CPU.
BOOKKEEPING_NAMES = frozenset(
    (
        "TorchDynamo Cache Lookup",
        "Pregraph bytecode",
        "Postgraph bytecode",
        "AOTDispatcher Runtime Wrapper Prologue",
        "AOTDispatcher Runtime Wrapper Epilogue",
        SYNC_ANNOTATION,
    )
)
# Ops that allocate or reinterpret memory without computing: not "device work" on a CPU.
NO_COMPUTE_OPS = frozenset(
    (
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::view",
        "aten::_unsafe_view",
        "aten::as_strided",
        "aten::reshape",
        "aten::_reshape_alias",
        "aten::expand",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::detach",
        "aten::alias",
        "aten::slice",
        "aten::select",
        "aten::resize_",
        "aten::lift_fresh",
        "detach",
        "aten::result_type",
        "aten::resolve_conj",
        "aten::resolve_neg",
    )
)


# Composite ops that only dispatch to the op doing the work: on a CPU trace, when they have op
# children, their own (self) time is dispatch, not device work.
DISPATCH_WRAPPERS = frozenset(
    (
        "aten::linear",
        "aten::matmul",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::convolution",
        "aten::_convolution",
        "aten::conv_transpose2d",
        "aten::batch_norm",
        "aten::_batch_norm_impl_index",
        "aten::layer_norm",
        "aten::group_norm",
        "aten::instance_norm",
        "aten::dropout",
        "aten::feature_dropout",
        "aten::softmax",
        "aten::log_softmax",
        "aten::cross_entropy_loss",
        "aten::nll_loss",
        "aten::nll_loss_nd",
        "aten::scaled_dot_product_attention",
        "aten::max_pool2d",
        "aten::adaptive_avg_pool2d",
        "aten::embedding",
        "aten::to",
        "aten::contiguous",
        "aten::flatten",
        "aten::chunk",
        "aten::split",
        "aten::rms_norm",
        "CompiledFunction",
        "CompiledFunctionBackward",
    )
)
# A compiled graph's call (Inductor's generated code) is recorded as an annotation around it:
# its self time is device work on a CPU trace.  (The dynamo region around it, "Torch-Compiled
# Region", is guards and dispatch: not work.)
COMPILED_GRAPH_PREFIX = "## Call CompiledFxGraph"
DYNAMO_REGION_PREFIX = "Torch-Compiled Region"
_NOT_WORK = BOOKKEEPING_NAMES | NO_COMPUTE_OPS


def _is_generated(name: str) -> bool:
    """An Inductor-generated kernel recorded as an op (Inductor's kernel profile)."""
    return name.startswith(("graph_", "triton_", "cpp_fused")) or "_cpp_fused_" in name


@dataclass
class OpRow:
    name: str
    calls: int
    cpu_self_us: float
    cpu_total_us: float
    device_self_us: float
    device_total_us: float
    device_share: float
    device_calls: int
    launching_calls: int = 0  # calls that launched device work directly
    input_dims: str | None = None
    input_types: str | None = None
    # CUDA/HIP graphs (opscope.analysis.graph_ops): calls that ran in graph replays, the
    # modules they ran in and the call stack of the one with most device time
    graph_replayed: bool = False
    replayed_calls: int = 0
    modules: list[dict[str, Any]] | None = None
    call_stack: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "calls": self.calls,
            "cpu_self_us": self.cpu_self_us,
            "cpu_total_us": self.cpu_total_us,
            "device_self_us": self.device_self_us,
            "device_total_us": self.device_total_us,
            "device_share": self.device_share,
            "device_calls": self.device_calls,
            "launching_calls": self.launching_calls,
        }
        if self.input_dims is not None or self.input_types is not None:
            d["input_dims"] = self.input_dims
            d["input_types"] = self.input_types
        if self.graph_replayed:
            d["graph_replayed"] = True
            d["replayed_calls"] = self.replayed_calls
            d["modules"] = self.modules or []
            d["call_stack"] = self.call_stack or []
        return d


@dataclass
class OpTable:
    rows: list[OpRow]
    device_is_host: bool
    device_time_us: float  # all device time in the window (the share's denominator)
    by_shape: list[OpRow] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[OpRow]:
        return iter(self.rows)

    def __getitem__(self, index: int) -> OpRow:
        return self.rows[index]

    def sorted(self, key: str = "device_self_us", descending: bool = True) -> list[OpRow]:
        if key not in SORT_KEYS:
            raise ValueError(f"unknown sort key {key!r}; choose one of {', '.join(SORT_KEYS)}")
        return sorted(self.rows, key=lambda r: getattr(r, key), reverse=descending)

    def row(self, name: str) -> OpRow | None:
        for r in self.rows:
            if r.name == name:
                return r
        return None


def select_window(table: pa.Table, steps: tuple[int, int] | None) -> pa.Table:
    """Rows whose ``step`` is in ``[first, last]`` (inclusive); every row when ``steps`` is None."""
    if steps is None:
        return table
    lo, hi = steps
    col = table.column("step")
    mask = pc.and_(pc.greater_equal(col, lo), pc.less_equal(col, hi))
    return table.filter(pc.fill_null(mask, False))


#: the columns of ``trace.ops`` that :func:`op_table` reads (merge, host execution, the
#: aggregates and the replay marks)
_OP_TABLE_COLUMNS = (
    "id",
    "name",
    "kind",
    "parent_op",
    "depth",
    "is_leaf",
    "dur_ns",
    "self_ns",
    "device_self_ns",
    "device_total_ns",
    "device_self_count",
    "device_total_count",
    "input_dims",
    "input_types",
    "step",
)


def op_table(trace: Trace, steps: tuple[int, int] | None = None) -> OpTable:
    """Aggregate the trace's ops per name (and per name + shapes)."""
    # only the columns read below: the filters then copy less (at 10M events the table's
    # other columns were a sixth of its temporary peak)
    ops = select_window(trace.ops.select(_OP_TABLE_COLUMNS), steps)
    device_is_host = trace.device.kind == "cpu"
    keep = ~Codes.of(ops.column("kind")).eq("step") & ~Codes.of(ops.column("name")).isin(
        BOOKKEEPING_NAMES
    )
    # the step markers, the bookkeeping and the folded duplicates go in one filter
    ops = merge_duplicate_nodes(ops, keep)
    if device_is_host:
        ops = host_execution(ops)
        device_total_ns = int(pc.sum(ops.column("device_self_ns")).as_py() or 0)
    else:
        # the device executions of the window, read off the trace's index (no filtered copy
        # of the event table; a null step is in no window, as select_window has it)
        idx = trace.index
        work = idx.is_work & idx.in_steps(steps)
        if steps is not None:
            work &= valid(trace.events.column("step"))
        device_total_ns = int(idx.dur[work].sum())

    rows = _aggregate(ops, ["name"], device_is_host, device_total_ns)
    by_shape = _aggregate(
        ops, ["name", "input_dims", "input_types"], device_is_host, device_total_ns
    )
    if trace.graph_capture is not None:
        mark_replayed(trace, ops, rows, by_shape)
    return OpTable(
        rows=rows,
        device_is_host=device_is_host,
        device_time_us=device_total_ns / 1e3,
        by_shape=by_shape,
    )


def _parent_rows(ops: pa.Table, rows: np.ndarray | None = None) -> np.ndarray:
    """Row position of each op's parent op (-1 for none or a parent outside the table);
    ``rows``: of the table made of those rows only (positions in it), read without making it."""
    ids = np.asarray(ops.column("id").to_numpy(zero_copy_only=False), dtype=np.int64)
    parent_ids = np.asarray(
        ops.column("parent_op").fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64
    )
    if rows is not None:
        ids, parent_ids = ids[rows], parent_ids[rows]
    n = len(ids)
    pos = np.searchsorted(ids, parent_ids)
    ok = (parent_ids >= 0) & (pos < n)
    ok[ok] &= ids[pos[ok]] == parent_ids[ok]
    return np.where(ok, pos, -1)


def merge_duplicate_nodes(ops: pa.Table, keep: np.ndarray | None = None) -> pa.Table:
    """Fold an op into its parent when both have the same name and it is the parent's only
    child op - a dispatcher artefact (``aten::mean`` calling the ``aten::mean.dim`` overload).

    torch.profiler's tables do the same (``EventList._remove_dup_nodes``), so call counts agree
    with ``key_averages()``; the parent adopts the child's self time, device work and children.
    ``keep``: a row mask; the result is then that of ``ops.filter(keep)``, made with one
    filter of the table instead of two (the table's list columns make a filter its costliest
    part: at 1M events about 0.1-0.2 s and a copy of the table each).
    """
    sub = None if keep is None else np.flatnonzero(keep)
    n = ops.num_rows if sub is None else len(sub)
    if n == 0:
        return ops if keep is None else ops.filter(pa.array(keep))
    parent_row = _parent_rows(ops, sub)
    names = Codes.of(ops.column("name")).codes
    if sub is not None:
        names = names[sub]
    has_parent = parent_row >= 0
    child_count = np.bincount(parent_row[has_parent], minlength=n)
    dup = np.zeros(n, dtype=bool)
    rows_with_parent = np.nonzero(has_parent)[0]
    dup[rows_with_parent] = (names[rows_with_parent] == names[parent_row[rows_with_parent]]) & (
        child_count[parent_row[rows_with_parent]] == 1
    )
    if not dup.any():
        return ops if keep is None else ops.filter(pa.array(keep))

    def column(name: str, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
        """The whole column (the table's rows, a copy of its own) and the kept rows' values
        (the same array without ``keep``)."""
        whole = np.array(ops.column(name).to_numpy(zero_copy_only=False), dtype=dtype)
        return whole, (whole if sub is None else whole[sub])

    def put(whole: np.ndarray, kept: np.ndarray) -> np.ndarray:
        if sub is None:
            return kept
        whole[sub] = kept
        return whole

    # each duplicate folds into its nearest ancestor that is not itself a duplicate
    target = np.arange(n)
    dup_rows = np.flatnonzero(dup)
    t = parent_row[dup_rows]
    while True:
        climb = dup[t]
        if not climb.any():
            break
        t[climb] = parent_row[t[climb]]
    target[dup_rows] = t
    for name in ("self_ns", "device_self_ns", "device_self_count"):
        whole, values = column(name, np.int64)
        np.add.at(values, t, values[dup_rows])
        ops = ops.set_column(
            ops.schema.get_field_index(name), name, pa.array(put(whole, values), pa.int64())
        )
    # the target becomes a leaf exactly when its deepest folded duplicate was one
    whole_leaf, is_leaf = column("is_leaf", bool)
    _, depth = column("depth", np.int64)
    by_depth = np.argsort(depth[dup_rows], kind="stable")[::-1]
    _, deepest = np.unique(t[by_depth], return_index=True)
    chosen = dup_rows[by_depth][deepest]
    is_leaf[target[chosen]] = is_leaf[chosen]
    # children of a folded op now hang from the op it was folded into
    _, ids = column("id", np.int64)
    new_parent = np.where(has_parent, ids[np.maximum(parent_row, 0)], -1)
    reparent = has_parent & dup[np.maximum(parent_row, 0)]
    new_parent[reparent] = ids[target[parent_row[reparent]]]
    whole_parent = np.full(ops.num_rows, -1, dtype=np.int64)
    new_parent = put(whole_parent, new_parent)
    ops = ops.set_column(
        ops.schema.get_field_index("is_leaf"), "is_leaf", pa.array(put(whole_leaf, is_leaf))
    )
    ops = ops.set_column(
        ops.schema.get_field_index("parent_op"),
        "parent_op",
        pa.array(new_parent, pa.int64(), mask=new_parent < 0),
    )
    stay = ~dup
    if sub is not None:
        stay = np.zeros(ops.num_rows, dtype=bool)
        stay[sub[~dup]] = True
    return ops.filter(pa.array(stay))


def is_host_work(ops: pa.Table) -> np.ndarray:
    """Which rows of a CPU-only trace's ops table did work of their own (their self time is
    device work).

    On the CPU an op's own execution is its self time: every op that computes carries it,
    leaf or not (``aten::addmm`` computes though ``aten::copy_`` runs inside it).  Views,
    allocation (:data:`NO_COMPUTE_OPS`), bookkeeping (:data:`BOOKKEEPING_NAMES`) and pure
    dispatch wrappers (:data:`DISPATCH_WRAPPERS`, when they have op children) carry none, nor
    does dynamo's region around a compiled graph (:data:`DYNAMO_REGION_PREFIX`: guards).  A
    ``record_function`` annotation is Python, not work, except a compiled graph's call
    (:data:`COMPILED_GRAPH_PREFIX`): its self time is Inductor's generated code, unless that
    code's kernels are profiled as ops of their own (``graph_0_cpp_fused_...``, Inductor's
    kernel profile), which then carry it.
    """
    is_leaf = np.asarray(ops.column("is_leaf").to_numpy(zero_copy_only=False), dtype=bool)
    name, kind = Codes.of(ops.column("name")), Codes.of(ops.column("kind"))
    return _own_work(name, kind, is_leaf, _parent_rows(ops), np.ones(ops.num_rows, dtype=bool))


def host_work(index: EventIndex) -> np.ndarray:
    """The rows that did work of their own on a CPU trace: :func:`is_host_work` over the
    event index."""
    return _own_work(index.name, index.kind, index.is_leaf, index.tree_parent, index.in_tree)


def _own_work(
    name: Codes, kind: Codes, is_leaf: np.ndarray, parent: np.ndarray, nodes: np.ndarray
) -> np.ndarray:
    """:func:`is_host_work`'s rule over rows given as name and kind codes, leafness, the
    op-tree parent row and the rows that are op-tree nodes; each name tested once."""
    named = name.passing
    skip = named(lambda v: v in _NOT_WORK or v.startswith(DYNAMO_REGION_PREFIX))
    wrapper = named(lambda v: v in DISPATCH_WRAPPERS) & ~is_leaf
    kernel = named(_is_generated) & nodes
    has_kernel = np.zeros(len(nodes), dtype=bool)
    has_kernel[parent[kernel & (parent >= 0)]] = True
    graph = named(lambda v: v.startswith(COMPILED_GRAPH_PREFIX))
    compiled = kind.eq("annotation") & graph & ~has_kernel
    return np.asarray(nodes & (kind.eq("op") | compiled) & ~skip & ~wrapper, dtype=bool)


def host_execution(ops: pa.Table) -> pa.Table:
    """Fill the device columns of a CPU-only trace's ops from the work each did itself
    (:func:`is_host_work`: its self time), summed up the tree for the totals."""
    n = ops.num_rows
    if n == 0:
        return ops
    work = is_host_work(ops)
    self_ns = np.asarray(ops.column("self_ns").to_numpy(zero_copy_only=False), dtype=np.int64)
    dev_self = np.where(work, self_ns, 0)
    dev_count = work.astype(np.int64)
    parent_row = _parent_rows(ops)
    depth = np.asarray(ops.column("depth").to_numpy(zero_copy_only=False), dtype=np.int64)
    total = dev_self.copy()
    total_count = dev_count.copy()
    for d in sorted(set(depth[parent_row >= 0].tolist()), reverse=True):
        rows = np.nonzero((depth == d) & (parent_row >= 0))[0]
        np.add.at(total, parent_row[rows], total[rows])
        np.add.at(total_count, parent_row[rows], total_count[rows])
    for name, values in (
        ("device_self_ns", dev_self),
        ("device_total_ns", total),
        ("device_self_count", dev_count),
        ("device_total_count", total_count),
    ):
        ops = ops.set_column(ops.schema.get_field_index(name), name, pa.array(values, pa.int64()))
    return ops


def _aggregate(
    ops: pa.Table, keys: list[str], device_is_host: bool, device_total_ns: int
) -> list[OpRow]:
    t = ops.select(
        [*keys, "dur_ns", "self_ns", "device_self_ns", "device_total_ns", "device_self_count"]
    )
    t = t.append_column(
        "launching", pc.cast(pc.greater(t.column("device_self_count"), 0), pa.int64())
    )
    g = group_columns(
        t,
        keys,
        [
            ("dur_ns", "count"),
            ("dur_ns", "sum"),
            ("self_ns", "sum"),
            ("device_self_ns", "sum"),
            ("device_total_ns", "sum"),
            ("device_self_count", "sum"),
            ("launching", "sum"),
        ],
    )
    dev_self = [v / 1e3 for v in g["device_self_ns_sum"]]
    share = (
        [d * 1e3 / device_total_ns for d in dev_self] if device_total_ns else [0.0] * len(dev_self)
    )
    none = [None] * len(dev_self)
    out = list(
        map(
            OpRow,
            g["name"],
            g["dur_ns_count"],
            [v / 1e3 for v in g["self_ns_sum"]],
            [v / 1e3 for v in g["dur_ns_sum"]],
            dev_self,
            [v / 1e3 for v in g["device_total_ns_sum"]],
            share,
            g["device_self_count_sum"],
            g["launching_sum"],
            g.get("input_dims", none),
            g.get("input_types", none),
        )
    )
    out.sort(key=lambda row: (-row.device_self_us, -row.cpu_total_us, row.name))
    return out
