"""Matched collective instances kept as columns: what :func:`match_collectives` returns.

A job of 10^5 collectives over 64 ranks has 6.4 million waits.  As dicts (``{"<rank>": us}``
per instance, the report's contract) they take about half a second and hundreds of MB to
make, so the matching keeps them as arrays, one :class:`InstanceBlock` per process group:
per instance its name, seq, last rank, skews, transfer time and bytes; per member (a record
of the instance, instance by instance, ranks in order) its rank, its record's position in
its rank's list and its wait.  :class:`Instances` is a sequence of the instance dicts, made
as they are read; the figures over all instances (each rank's wait summed, the stragglers'
sums, each rank's members) are computed on the arrays, in the same order of addition as a
loop over the dicts, so they are the same floats.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, pairwise
from typing import Any, overload

import numpy as np

from opscope.trace.gcpause import collector_paused


@dataclass(frozen=True, eq=False)  # arrays: no field-by-field ==
class InstanceBlock:
    """The instances of one process group, in seq/index order (see the module docstring).

    ``starts[g]``: the first member of instance ``g`` (``len(starts) == instances + 1``);
    ``partial[g]``: the ranks of an instance that lacks some, None where every rank of
    ``group_ranks`` is a member.  ``bytes`` is -1 where unknown; ``position`` is -1 where the
    records' positions are not known (columns made without them)."""

    pg: str
    names: list[str]
    group_ranks: list[int]
    name: np.ndarray
    seq: np.ndarray
    last_rank: np.ndarray
    start_skew_us: np.ndarray
    end_skew_us: np.ndarray
    dur_us: np.ndarray
    bytes: np.ndarray
    starts: np.ndarray
    rank: np.ndarray
    position: np.ndarray
    wait_us: np.ndarray
    partial: list[list[int] | None]

    def __len__(self) -> int:
        return len(self.partial)

    def counts(self) -> np.ndarray:
        """Each instance's number of members."""
        return np.diff(self.starts)

    def dicts(self, lo: int = 0, hi: int | None = None) -> list[dict[str, Any]]:
        """The dicts of instances ``lo`` to ``hi`` (the report's ``distributed.instances``)."""
        hi = len(self) if hi is None else min(hi, len(self))
        if lo >= hi:
            return []
        key_of = {r: str(r) for r in self.group_ranks}
        full_keys = list(key_of.values())  # one string per rank, shared by every instance
        flat = iter(self.wait_us[int(self.starts[lo]) : int(self.starts[hi])].tolist())
        names, pg, everyone = self.names, self.pg, self.group_ranks
        cols = [
            getattr(self, k)[lo:hi].tolist()
            for k in ("name", "seq", "last_rank", "start_skew_us", "end_skew_us", "dur_us")
        ]
        out: list[dict[str, Any]] = []
        for nm, k, rk, lr, ss, es, d, by in zip(
            cols[0],
            cols[1],
            self.partial[lo:hi],
            *cols[2:],
            self.bytes[lo:hi].tolist(),
            strict=True,
        ):
            out.append(
                {
                    "name": names[nm],
                    "pg": pg,
                    "seq": k,
                    "ranks": list(everyone) if rk is None else rk,
                    "last_rank": lr,
                    "start_skew_us": ss,
                    "end_skew_us": es,
                    # each wait dict takes the next values (zip stops at the keys first)
                    "wait_us": dict(
                        zip(full_keys if rk is None else [key_of[r] for r in rk], flat)  # noqa: B905
                    ),
                    "dur_us": d,
                    "bytes": by if by >= 0 else None,
                }
            )
        return out


#: Instances whose dicts are made per block while iterating.
_BLOCK = 4096


class Instances(Sequence[dict[str, Any]]):
    """The matched instances of a job, block after block (groups by name); reading one gives
    its dict (made anew on each read: change a copy, not the table)."""

    def __init__(self, blocks: Sequence[InstanceBlock] = ()) -> None:
        self.blocks = [b for b in blocks if len(b)]
        self._offsets = np.cumsum([0, *(len(b) for b in self.blocks)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self._offsets[-1])

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("instance index out of range")
        b = int(np.searchsorted(self._offsets, i, side="right")) - 1
        at = i - int(self._offsets[b])
        return self.blocks[b].dicts(at, at + 1)[0]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for block in self.blocks:
            for lo in range(0, len(block), _BLOCK):
                with collector_paused():
                    chunk = block.dicts(lo, lo + _BLOCK)
                yield from chunk

    def dicts(self) -> list[dict[str, Any]]:
        """Every instance's dict, in order."""
        out: list[dict[str, Any]] = []
        with collector_paused():
            for block in self.blocks:
                out.extend(block.dicts())
        return out

    def __eq__(self, other: object) -> bool:
        """Equal to a list (or another table) of the same instance dicts."""
        if isinstance(other, (Instances, list, tuple)):
            return len(self) == len(other) and self.dicts() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Instances({len(self)} in {len(self.blocks)} groups)"

    # -- figures over every instance, on the arrays ----------------------------------------

    def wait_by_rank(self) -> dict[int, float]:
        """Each member rank's waits summed over the instances (in instance order, as a loop
        adding them one by one from 0.0 would)."""
        ranks = np.concatenate([b.rank for b in self.blocks]) if self.blocks else np.zeros(0)
        waits = np.concatenate([b.wait_us for b in self.blocks]) if self.blocks else np.zeros(0)
        return _sums_in_order(ranks.astype(np.int64), waits)

    def knows_positions(self) -> bool:
        """Whether the members' record positions are known (columns made with them)."""
        return all(len(b.position) == 0 or int(b.position[0]) >= 0 for b in self.blocks)

    def member_waits(self) -> list[list[tuple[int, int, float]]]:
        """For each instance, ``(rank, record position, wait µs)`` of each member."""
        out: list[list[tuple[int, int, float]]] = []
        for block in self.blocks:
            ranks, pos, wait = block.rank.tolist(), block.position.tolist(), block.wait_us.tolist()
            out.extend(
                list(zip(ranks[a:b], pos[a:b], wait[a:b], strict=True))
                for a, b in pairwise(block.starts.tolist())
            )
        return out

    def members(self) -> list[dict[int, int]]:
        """For each instance, ``{rank: position of its record in that rank's list}`` (the
        positions the columns were made with)."""
        return [{r: pos for r, pos, _wait in m} for m in self.member_waits()]


def _sums_in_order(keys: np.ndarray, values: np.ndarray) -> dict[int, float]:
    """``{key: its values summed in their order, from 0.0}`` (a cumulative sum per key is
    sequential, unlike numpy's pairwise ``sum``)."""
    if not len(keys):
        return {}
    order = np.argsort(keys, kind="stable")
    k, v = keys[order], values[order]
    cuts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[cuts[1:], len(k)]
    return {
        int(k[a]): float(np.cumsum(v[a:b])[-1])
        for a, b in zip(cuts.tolist(), ends.tolist(), strict=True)
    }


def full_waits(block: InstanceBlock) -> tuple[np.ndarray, np.ndarray]:
    """(the instances every rank of the group is a member of, their waits as a matrix: one
    row per instance, one column per rank of ``group_ranks``)."""
    width = len(block.group_ranks)
    full = block.counts() == width
    if bool(full.all()):
        return np.arange(len(block)), block.wait_us.reshape(len(block), width)
    kept = block.wait_us[np.repeat(full, block.counts())]
    return np.flatnonzero(full), kept.reshape(-1, width)


def row_totals(block: InstanceBlock) -> np.ndarray:
    """Each instance's waits summed over its members, in rank order from 0.0 (as Python's
    ``sum`` of its wait dict's values)."""
    total = np.zeros(len(block), dtype=np.float64)
    rows, m = full_waits(block)
    if len(rows):
        full = np.zeros(len(rows), dtype=np.float64)
        for j in range(m.shape[1]):  # column by column: the additions of a loop, in its order
            full += m[:, j]
        total[rows] = full
    w = block.wait_us
    for g, rk in enumerate(block.partial):
        if rk is not None:
            a, b = int(block.starts[g]), int(block.starts[g + 1])
            total[g] = sum(w[a:b].tolist())
    return total


def straggler_sums(
    instances: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, float], dict[str, float], dict[str, int], float]:
    """What :func:`~opscope.analysis.collective_match.stragglers` sums over the instances:
    ``(caused, own, times_last, rank_time)`` keyed by the rank's string; by a loop over
    instance dicts, or on a table's arrays with the same additions in the same order (the
    same floats)."""
    if not isinstance(instances, Instances):
        return _dict_straggler_sums(instances)
    contrib: list[np.ndarray] = []
    totals: list[np.ndarray] = []
    lasts: list[np.ndarray] = []
    # the instances of two ranks or more grouped by their ranks, groups in the order first met
    groups: dict[tuple[int, ...], tuple[int, list[np.ndarray]]] = {}
    seen = 0
    for block in instances.blocks:
        n = len(block)
        counts = block.counts()
        total = row_totals(block)
        multi = counts >= 2
        both = np.empty(2 * n, dtype=np.float64)
        both[0::2] = block.dur_us * counts
        both[1::2] = np.where(multi, total, 0.0)
        contrib.append(both)
        totals.append(total[multi])
        lasts.append(block.last_rank[multi])
        full, matrix = full_waits(block)
        if len(block.group_ranks) >= 2 and len(full):
            key = tuple(block.group_ranks)
            groups.setdefault(key, (seen + int(full[0]), []))[1].append(matrix)
        for g in np.flatnonzero(multi & (counts != len(block.group_ranks))).tolist():
            ranks = block.partial[g]
            assert ranks is not None
            a, b = int(block.starts[g]), int(block.starts[g + 1])
            groups.setdefault(tuple(ranks), (seen + g, []))[1].append(block.wait_us[None, a:b])
        seen += n
    rank_time = float(np.cumsum(np.concatenate(contrib))[-1]) if contrib else 0.0
    caused_by = _sums_in_order(
        np.concatenate(lasts).astype(np.int64) if lasts else np.zeros(0, dtype=np.int64),
        np.concatenate(totals) if totals else np.zeros(0),
    )
    times: dict[str, int] = {}
    if lasts:
        uniq, n_last = np.unique(np.concatenate(lasts), return_counts=True)
        times = {str(int(r)): int(c) for r, c in zip(uniq.tolist(), n_last.tolist(), strict=True)}
    own: dict[str, float] = {}
    for key, (_first, mats) in sorted(groups.items(), key=lambda kv: kv[1][0]):
        sums = (mats[0] if len(mats) == 1 else np.concatenate(mats)).sum(axis=0)
        for r, s in zip(key, sums.tolist(), strict=True):
            own[str(r)] = own.get(str(r), 0.0) + s
    return {str(r): v for r, v in caused_by.items()}, own, times, rank_time


def _dict_straggler_sums(
    instances: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, float], dict[str, float], dict[str, int], float]:
    caused: dict[str, float] = {}
    own: dict[str, float] = {}
    times_last: dict[str, int] = {}
    rank_time = 0.0
    by_keys: dict[tuple[str, ...], list[Iterable[float]]] = {}
    for inst in instances:
        waits: Mapping[str, float] = inst["wait_us"]
        n = len(waits)
        rank_time += float(inst["dur_us"]) * n
        if n < 2:
            continue
        total = sum(waits.values())
        rank_time += total
        last = str(inst["last_rank"])
        caused[last] = caused.get(last, 0.0) + total
        times_last[last] = times_last.get(last, 0) + 1
        by_keys.setdefault(tuple(waits), []).append(waits.values())
    for keys, rows in by_keys.items():
        flat = np.fromiter(chain.from_iterable(rows), dtype=np.float64, count=len(keys) * len(rows))
        sums = flat.reshape(len(rows), len(keys)).sum(axis=0)
        for k, s in zip(keys, sums.tolist(), strict=True):
            own[k] = own.get(k, 0.0) + s
    return caused, own, times_last, rank_time


def transfer_sums(instances: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[float]]:
    """Per (collective name, process group): ``[instances, transfer times summed, bytes
    summed, transfer times of the instances with bytes summed]``, each added in instance
    order from 0: by a loop over instance dicts, or the same additions on a table's arrays."""
    out: dict[tuple[str, str], list[float]] = {}
    if not isinstance(instances, Instances):
        for inst in instances:
            acc = out.setdefault((str(inst.get("name")), str(inst.get("pg"))), [0.0, 0.0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += float(inst.get("dur_us") or 0.0)
            if inst.get("bytes"):
                acc[2] += float(inst["bytes"])
                acc[3] += float(inst.get("dur_us") or 0.0)
        return out
    for block in instances.blocks:
        sized = block.bytes > 0
        all_dur = _sums_in_order(block.name, block.dur_us)
        codes, counts = np.unique(block.name, return_counts=True)
        by_dur = _sums_in_order(block.name[sized], block.dur_us[sized])
        by_bytes = _sums_in_order(block.name[sized], block.bytes[sized].astype(np.float64))
        for code, n in zip(codes.tolist(), counts.tolist(), strict=True):
            acc = out.setdefault((block.names[code], block.pg), [0, 0.0, 0.0, 0.0])
            acc[0] += n
            acc[1] += all_dur[code]
            acc[2] += by_bytes.get(code, 0.0)
            acc[3] += by_dur.get(code, 0.0)
    return out


def wait_by_rank(instances: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Each member rank's waits summed over the instances, in instance order from 0.0: by a
    loop over instance dicts, or :meth:`Instances.wait_by_rank` on a table's arrays."""
    if isinstance(instances, Instances):
        return instances.wait_by_rank()
    out: dict[int, float] = {}
    for inst in instances:
        for rank, w in (inst.get("wait_us") or {}).items():
            out[int(rank)] = out.get(int(rank), 0.0) + float(w)
    return out


__all__ = [
    "InstanceBlock",
    "Instances",
    "row_totals",
    "straggler_sums",
    "transfer_sums",
    "wait_by_rank",
]
