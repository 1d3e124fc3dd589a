"""Collectives matched across the ranks of a job: instances, waits and stragglers.

:func:`match_collectives` lines up the ranks' collective records
(:func:`opscope.analysis.collectives.collective_records`) into instances, one per collective
of the job; :func:`stragglers` names the ranks the others wait for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from opscope.analysis.instance_table import InstanceBlock, Instances, straggler_sums
from opscope.analysis.lateness import evidence
from opscope.trace.commnames import P2P_TYPES, SAME_SIZE_TYPES

# -- matching across ranks -------------------------------------------------------------------


@dataclass
class CollectiveColumns:
    """The records of several ranks as arrays (one entry per record, ranks concatenated):
    what :func:`match_collectives` works on.  Codes index ``pgs``/``names``; ``seq`` and
    ``bytes`` are -1 where None (``has_seq`` tells a seq of -1 from none)."""

    rank: np.ndarray
    pg: np.ndarray
    pgs: list[str]
    name: np.ndarray
    names: list[str]
    seq: np.ndarray
    has_seq: np.ndarray
    index: np.ndarray
    bytes: np.ndarray
    arrival: np.ndarray
    end: np.ndarray
    dur_us: np.ndarray
    pg_size: np.ndarray  # -1 where None
    #: each record's position in its rank's list (None: not known, as for columns made
    #: directly; the instances' members then have none)
    position: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.rank)


def _codes(values: list[str], table: dict[str, int]) -> np.ndarray:
    """Codes of strings, growing ``table`` (first seen, first code)."""
    get = table.setdefault
    return np.fromiter((get(v, len(table)) for v in values), dtype=np.int64, count=len(values))


def _int_or(values: Iterable[Any], count: int) -> tuple[np.ndarray, np.ndarray]:
    """(values with None as -1, which were not None)."""
    raw = list(values)
    has = np.fromiter((v is not None for v in raw), dtype=bool, count=count)
    if has.all():
        return np.fromiter(raw, dtype=np.int64, count=count), has
    return np.fromiter((-1 if v is None else v for v in raw), dtype=np.int64, count=count), has


def collective_columns(
    records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]],
) -> CollectiveColumns:
    """The records of each rank (lists of :func:`collective_records` dicts) as columns; the
    record's own ``rank`` is ignored in favour of the key it is filed under."""
    pg_table: dict[str, int] = {}
    name_table: dict[str, int] = {}
    parts: dict[str, list[np.ndarray]] = {
        k: []
        for k in (
            "rank",
            "pg",
            "name",
            "seq",
            "has_seq",
            "index",
            "bytes",
            "arrival",
            "end",
            "dur_us",
            "pg_size",
            "position",
        )
    }
    for r, recs in records_by_rank.items():
        n = len(recs)
        if not n:
            continue
        parts["rank"].append(np.full(n, int(r), dtype=np.int64))
        parts["pg"].append(_codes([str(p) for p in map(itemgetter("pg"), recs)], pg_table))
        parts["name"].append(_codes(list(map(itemgetter("name"), recs)), name_table))
        seq, has = _int_or(map(itemgetter("seq"), recs), n)
        parts["seq"].append(seq)
        parts["has_seq"].append(has)
        parts["index"].append(np.fromiter(map(itemgetter("index"), recs), np.int64, n))
        parts["bytes"].append(_int_or(map(itemgetter("bytes"), recs), n)[0])
        parts["arrival"].append(np.fromiter(map(itemgetter("arrival_ns"), recs), np.int64, n))
        parts["end"].append(np.fromiter(map(itemgetter("end_ns"), recs), np.int64, n))
        parts["dur_us"].append(np.fromiter(map(itemgetter("dur_us"), recs), np.float64, n))
        parts["pg_size"].append(_int_or(map(itemgetter("pg_size"), recs), n)[0])
        parts["position"].append(np.arange(n, dtype=np.int64))
    empty = {"has_seq": np.zeros(0, dtype=bool), "dur_us": np.zeros(0, dtype=np.float64)}
    cols = {
        k: np.concatenate(v) if v else empty.get(k, np.zeros(0, dtype=np.int64))
        for k, v in parts.items()
    }
    return CollectiveColumns(
        pgs=list(pg_table),
        names=list(name_table),
        **cols,
    )


#: The keys of an instance, in order.
INSTANCE_KEYS = (
    "name",
    "pg",
    "seq",
    "ranks",
    "last_rank",
    "start_skew_us",
    "end_skew_us",
    "wait_us",
    "dur_us",
    "bytes",
)


def match_collectives(
    records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]] | CollectiveColumns,
) -> tuple[Instances, list[str]]:
    """Line the ranks' collective records up into instances: ``(instances, warnings)``.

    Per process group, records are matched by ``seq`` when every record of the group (on
    every rank) has one, else by ``index``; point-to-point records (send, recv) are not
    matched (a send pairs with a recv on another rank, not with a send).  Every rank of an
    instance must agree on the collective type and, for the types whose size is the same on
    every rank (:data:`SAME_SIZE_TYPES`), on ``bytes`` (where known).  At the first instance
    where they do not, a warning names the ranks that differ from the majority and matching
    of that group stops there: the later records of the group could be shifted by one, and a
    shifted match would give wrong waits without a sign of it.  A rank with no record of an
    instance (its window started later or ended earlier, or a record is missing) is left out
    of that instance and named in one warning per group and rank; a group with records from
    fewer ranks than its ``pg_size`` says so too.  A rank with two records of one ``seq``
    keeps the first.

    Instance keys: ``name``, ``pg``, ``seq`` (the seq, or the index), ``ranks``,
    ``last_rank`` (the last to arrive; the lowest of a tie), ``start_skew_us`` (last
    arrival - first), ``end_skew_us`` (last end - first), ``wait_us`` (``{"<rank>": last
    arrival - own arrival}``), ``dur_us`` (the transfer time: the shortest record duration
    over the ranks, the last arrival's in effect) and ``bytes`` (the largest known).
    Instances come per group (groups by name), in ``seq``/index order, as
    :class:`~opscope.analysis.instance_table.Instances`: a sequence of those dicts made as
    they are read, the waits kept as arrays until then.
    """
    cols = (
        records_by_rank
        if isinstance(records_by_rank, CollectiveColumns)
        else collective_columns(records_by_rank)
    )
    blocks: list[InstanceBlock] = []
    warnings: list[str] = []
    if not len(cols):
        return Instances(), warnings
    p2p_codes = [i for i, n in enumerate(cols.names) if n in P2P_TYPES]
    p2p = np.isin(cols.name, p2p_codes) if p2p_codes else np.zeros(len(cols), dtype=bool)
    for pg_code in sorted(range(len(cols.pgs)), key=lambda i: cols.pgs[i]):
        mask = (cols.pg == pg_code) & ~p2p
        if mask.all():  # all records: no gathers needed (nor their 8 bytes a record)
            _match_group(cols, cols.pgs[pg_code], None, blocks, warnings)
        elif mask.any():
            _match_group(cols, cols.pgs[pg_code], np.flatnonzero(mask), blocks, warnings)
    return Instances(blocks), warnings


def _majority_outliers(values: np.ndarray, ranks: np.ndarray) -> tuple[Any, list[int]]:
    """The most common value (ties: the smallest) and the ranks holding another."""
    uniq, counts = np.unique(values, return_counts=True)
    ref = uniq[int(np.argmax(counts))]
    return ref, sorted(int(r) for r in ranks[values != ref])


def _rank_codes(rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ranks, sorted; each record's position among them)."""
    lo, hi = int(rank.min()), int(rank.max())
    if lo >= 0 and hi < 1 << 22:  # ranks: small integers, counted rather than sorted
        present = np.bincount(rank, minlength=hi + 1) > 0
        code = np.cumsum(present) - 1
        return np.flatnonzero(present).astype(np.int64), code[rank].astype(np.int64)
    uniq, inverse = np.unique(rank, return_inverse=True)
    return uniq.astype(np.int64), inverse.reshape(-1).astype(np.int64)


def _match_group(
    cols: CollectiveColumns,
    pg: str,
    sel: np.ndarray | None,
    blocks: list[InstanceBlock],
    warnings: list[str],
) -> None:
    """Match the records of one group (``sel``: their positions, sorted; None: all)."""
    by_seq = bool((cols.has_seq if sel is None else cols.has_seq[sel]).all())
    key_src = cols.seq if by_seq else cols.index
    key_all = key_src if sel is None else key_src[sel]
    rank_all = cols.rank if sel is None else cols.rank[sel]
    # one stable sort on (key, rank): each rank's records come in key order already, so the
    # sort merges one sorted run per rank
    group_ranks, rank_codes = _rank_codes(rank_all)
    n_codes = len(group_ranks)
    k_min = int(key_all.min())
    composite = (key_all - k_min) * n_codes + rank_codes
    del rank_codes
    order = np.argsort(composite, kind="stable")
    rows = order if sel is None else sel[order]
    composite = composite[order]
    del order
    key, code = np.divmod(composite, n_codes)  # code: the position among the group's ranks
    key += k_min
    rank = group_ranks[code]
    label = "seq" if by_seq else "index"
    # a rank with two records of one key keeps the first
    dup = np.zeros(len(rows), dtype=bool)
    if len(rows) > 1:
        dup[1:] = composite[1:] == composite[:-1]
    if dup.any():
        doubled = sorted({int(r) for r in rank[dup]})
        warnings.append(
            f"pg {pg}: ranks {doubled} have several records of one {label} "
            f"({int(dup.sum())} extra, first at {label} {int(key[dup][0])}); the first is kept"
        )
        keep = ~dup
        rows, key, rank, code = rows[keep], key[keep], rank[keep], code[keep]
    del composite, dup
    n_ranks = n_codes
    known_size = int((cols.pg_size if sel is None else cols.pg_size[sel]).max())
    if known_size > n_ranks:
        warnings.append(
            f"pg {pg}: records from {n_ranks} of its {known_size} ranks "
            f"({', '.join(map(str, group_ranks.tolist()))}); waits and skews cover those only"
        )
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, len(rows)])
    n_groups = len(starts)

    # agreement: type on every rank; size where the type's size is the same on every rank
    name = cols.name[rows]
    nbytes = cols.bytes[rows]
    name_bad = np.minimum.reduceat(name, starts) != np.maximum.reduceat(name, starts)
    big = np.iinfo(np.int64).max
    b_min = np.minimum.reduceat(np.where(nbytes >= 0, nbytes, big), starts)
    b_max = np.maximum.reduceat(nbytes, starts)
    same_size = np.isin(
        cols.name[rows[starts]],
        [i for i, n in enumerate(cols.names) if n in SAME_SIZE_TYPES] or [-1],
    )
    size_bad = same_size & (b_max >= 0) & (b_min != big) & (b_min != b_max)
    bad = np.flatnonzero(name_bad | size_bad)
    if len(bad):
        g = int(bad[0])
        a, b = int(starts[g]), int(starts[g] + counts[g])
        at = f"{label} {int(key[a])}"
        if name_bad[g]:
            ref, odd = _majority_outliers(name[a:b], rank[a:b])
            found = sorted({cols.names[int(v)] for v in name[a:b] if v != ref})
            what = f"not {cols.names[int(ref)]} but {', '.join(found)}"
        else:
            valid = nbytes[a:b] >= 0
            ref, odd = _majority_outliers(nbytes[a:b][valid], rank[a:b][valid])
            what = f"bytes differ from {int(ref)}"
        later = n_groups - g
        warnings.append(
            f"pg {pg}: ranks {odd} disagree at {at} ({what}); matching of pg {pg} stopped "
            f"there ({later} instance{'s' if later != 1 else ''} from it on not matched)"
        )
        cut = a
        rows, key, rank, code = rows[:cut], key[:cut], rank[:cut], code[:cut]
        starts, counts = starts[:g], counts[:g]
        n_groups = g
        nbytes = nbytes[:cut]
        b_max = b_max[:g]
        if not n_groups:
            return

    del name, nbytes
    group_of = np.repeat(np.arange(n_groups), counts)
    # missing ranks, one warning per rank
    short = np.flatnonzero(counts < n_ranks)
    if len(short):
        in_short = (counts < n_ranks)[group_of]
        present = np.zeros((len(short), n_ranks), dtype=bool)
        present[np.searchsorted(short, group_of[in_short]), code[in_short]] = True
        for j in np.flatnonzero(~present.all(axis=0)).tolist():
            miss = np.flatnonzero(~present[:, j])
            warnings.append(
                f"pg {pg}: rank {int(group_ranks[j])} has no record of {len(miss)} "
                f"instance{'s' if len(miss) != 1 else ''} (first: {label} "
                f"{int(key[starts[short[miss[0]]]])}); matched without it"
            )

    # per instance: reductions over its records (the record-sized arrays dropped as soon as
    # they are reduced: at 10^5 x 64 each is 51 MB, and fresh pages are the first call's cost)
    end = cols.end[rows]
    end_skew = np.maximum.reduceat(end, starts) - np.minimum.reduceat(end, starts)
    del end
    dur = np.minimum.reduceat(cols.dur_us[rows], starts)
    name_of = cols.name[rows[starts]]
    key_of = key[starts]
    position = (
        np.full(len(rows), -1, dtype=np.int32)
        if cols.position is None
        else cols.position[rows].astype(np.int32)
    )
    arrival = cols.arrival[rows]
    del rows, key, group_of
    first = np.minimum.reduceat(arrival, starts)
    last = np.maximum.reduceat(arrival, starts)
    last_of = np.repeat(last, counts)
    # the last to arrive (the lowest rank of a tie: records are in rank order per instance)
    at_last = np.flatnonzero(arrival == last_of)
    inst_at = np.searchsorted(starts, at_last, side="right") - 1
    firsts = np.r_[True, inst_at[1:] != inst_at[:-1]]
    last_rank = rank[at_last[firsts]]
    del at_last, inst_at, firsts
    np.subtract(last_of, arrival, out=last_of)
    del arrival
    wait = np.round(last_of / 1000.0, 3)
    del last_of
    full = counts == n_ranks
    partial = np.flatnonzero(~full)
    ranks_of: list[list[int] | None] = [None] * n_groups
    for g, a, b in zip(
        partial.tolist(), starts[partial].tolist(), (starts + counts)[partial].tolist(), strict=True
    ):
        ranks_of[g] = rank[a:b].tolist()
    del code
    blocks.append(
        InstanceBlock(
            pg=pg,
            names=cols.names,
            group_ranks=group_ranks.tolist(),
            name=name_of,
            seq=key_of,
            last_rank=last_rank,
            start_skew_us=np.round((last - first) / 1000.0, 3),
            end_skew_us=np.round(end_skew / 1000.0, 3),
            dur_us=dur,
            bytes=b_max,
            starts=np.r_[starts, len(wait)].astype(np.int64),
            rank=rank.astype(np.int32),
            position=position,
            wait_us=wait,
            partial=ranks_of,
        )
    )


# -- stragglers ------------------------------------------------------------------------------

#: A straggler's caused wait is at least this many times the median of the other ranks'.
STRAGGLER_RATIO = 3.0
#: ... and at least this share of the time all ranks spent in the matched collectives.
STRAGGLER_SHARE = 0.25


def stragglers(instances: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ranks the others wait for, worst first (empty when no rank stands out).

    For each rank: ``times_last`` (instances of two ranks or more where it arrived last),
    ``caused_wait_us`` (over those instances, the others' waits summed), ``own_wait_us`` (its
    own waits summed) and ``cause`` (None: the trace tells when a rank arrived late, not
    why).  A rank *stands out* when both hold:

    * its caused wait is at least :data:`STRAGGLER_RATIO` times the median caused wait of the
      other ranks (it, not chance, makes the others wait: with ranks late in turn by noise,
      each causes a similar share); and
    * its caused wait is at least :data:`STRAGGLER_SHARE` of the rank-time in the matched
      collectives (every rank's wait plus the transfer time, over all instances): the waiting
      matters next to the collectives themselves.  (Gloo jobs on a shared two-core CPU, no rank
      slowed, gave the most-waited-for rank at most about a tenth; a rank slowed before each
      step's first collective gave 0.8 and more.)

    * it is late beyond the job's own noise, consistently
      (:func:`opscope.analysis.lateness.evidence`: later than the latest other rank by over
      the median spread of the other ranks' arrivals, and over the other ranks' median
      lateness when one of them was last, at 3 collectives or more, and at half or more of
      all the collectives where a rank is that late, by count or by time).  Its row says the
      test (``evidence``).

    Only the ranks that stand out are returned.
    """
    caused, own, times_last, rank_time = straggler_sums(instances)
    seen_by: dict[int, dict[str, Any]] | None = None
    ranks = sorted(own, key=int)
    out: list[dict[str, Any]] = []
    for r in ranks:
        mine = caused.get(r, 0.0)
        others = [caused.get(o, 0.0) for o in ranks if o != r]
        median = float(np.median(others)) if others else 0.0
        if mine <= 0 or mine < STRAGGLER_RATIO * median or mine < STRAGGLER_SHARE * rank_time:
            continue
        if seen_by is None:  # every rank's lateness, once, when a rank is a candidate
            seen_by = evidence(instances)
        seen = dict(seen_by.get(int(r)) or {"above_noise": False})
        if not seen.pop("above_noise"):
            continue
        out.append(
            {
                "rank": int(r),
                "times_last": times_last.get(r, 0),
                "caused_wait_us": round(mine, 3),
                "own_wait_us": round(own.get(r, 0.0), 3),
                "cause": None,
                "evidence": seen,
            }
        )
    out.sort(key=lambda d: (-d["caused_wait_us"], d["rank"]))
    return out


def instance_members(
    records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
) -> list[dict[int, int]]:
    """For each instance of :func:`match_collectives` over ``records_by_rank``: ``{rank:
    position of its record in that rank's list}``, by the rules of the matching (per process
    group, the key is ``seq`` when every record of the group has one, else ``index``;
    point-to-point records are not matched; a rank's first record of a key is the one kept).
    Matched :class:`~opscope.analysis.instance_table.Instances` of those records know their
    members' positions already."""
    if isinstance(instances, Instances) and instances.knows_positions():
        return instances.members()
    has_seq: dict[str, bool] = {}
    for recs in records_by_rank.values():
        for rec in recs:
            if rec["name"] not in P2P_TYPES:
                pg = str(rec["pg"])
                has_seq[pg] = has_seq.get(pg, True) and rec.get("seq") is not None
    at: dict[tuple[str, int, int], int] = {}
    for rank, recs in records_by_rank.items():
        for pos, rec in enumerate(recs):
            pg = str(rec["pg"])
            if rec["name"] in P2P_TYPES:
                continue
            key = rec["seq"] if has_seq[pg] else rec["index"]
            at.setdefault((pg, int(key), int(rank)), pos)
    out: list[dict[int, int]] = []
    for inst in instances:
        pg, key = str(inst["pg"]), int(inst["seq"])
        members = {int(r): at[(pg, key, int(r))] for r in inst["ranks"] if (pg, key, int(r)) in at}
        out.append(members)
    return out


def member_waits(
    records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
) -> list[list[tuple[int, int, float]]]:
    """For each instance: ``(rank, position of its record, its wait in µs)`` of each member
    (:func:`instance_members` with each member's ``wait_us``, 0 where none)."""
    if isinstance(instances, Instances) and instances.knows_positions():
        return instances.member_waits()
    return [
        [
            (r, pos, float((inst.get("wait_us") or {}).get(str(r), 0.0) or 0.0))
            for r, pos in m.items()
        ]
        for inst, m in zip(instances, instance_members(records_by_rank, instances), strict=True)
    ]


__all__ = [
    "INSTANCE_KEYS",
    "CollectiveColumns",
    "collective_columns",
    "instance_members",
    "match_collectives",
    "member_waits",
    "stragglers",
]
