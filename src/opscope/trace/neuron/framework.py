"""A framework (Kineto) trace merged into a Neuron profile: put on the system profile's clock,
its events already in the system profile dropped, the others added."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from opscope.trace.kineto.columns import KinetoParse
from opscope.trace.neuron.columns import Raw


def kineto_rows(parsed: KinetoParse) -> dict[str, Any]:
    ev = parsed.events

    def strs(name: str) -> list[str]:
        c = ev.column(name)
        if pa.types.is_dictionary(c.type):
            c = c.cast(pa.string())
        return [str(x) if x is not None else "" for x in c.to_pylist()]

    return {
        "cat": strs("cat"),
        "name": strs("name"),
        "pid": strs("pid"),
        "tid": strs("tid"),
        "start": ev.column("start_ns").to_pylist(),
        "dur": ev.column("dur_ns").to_pylist(),
        "correlation": ev.column("correlation").to_pylist(),
        "external_id": ev.column("external_id").to_pylist(),
        "args": ev.column("args").to_pylist(),
        "source": strs("source"),
        "kind": strs("kind"),
        "lane": strs("lane"),
    }


def _framework_offset(
    raw: Raw, k: dict[str, Any], pid: str
) -> tuple[int | None, int, set[int], set[int]]:
    """Clock offset (system profile minus framework trace) from framework events found in both
    (same name, thread and duration, paired in start order), the number of matched pairs, and
    the matched rows on each side (Kineto rows, system-profile rows)."""
    sys_groups: dict[tuple[str, str, int], list[int]] = {}
    for i in range(len(raw)):
        if raw.origin[i] == "framework" and raw.pid[i] == pid:
            sys_groups.setdefault((raw.name[i], raw.tid[i], raw.dur[i]), []).append(i)
    k_groups: dict[tuple[str, str, int], list[int]] = {}
    for j in range(len(k["name"])):
        if k["source"][j] in ("framework", "runtime") and k["pid"][j] == pid:
            k_groups.setdefault((k["name"][j], k["tid"][j], k["dur"][j]), []).append(j)
    diffs: Counter[int] = Counter()
    for key, group in sys_groups.items():
        krows = k_groups.get(key)
        if not krows or len(krows) != len(group):
            continue  # ambiguous group: not used to find the offset
        srows = sorted(group, key=lambda r: raw.start[r])
        krows = sorted(krows, key=lambda r: k["start"][r])
        for a, b in zip(srows, krows, strict=True):
            diffs[raw.start[a] - k["start"][b]] += 1
    if not diffs:
        return None, 0, set(), set()
    offset, _ = max(diffs.items(), key=lambda kv: (kv[1], -abs(kv[0])))
    # with the offset known, every Kineto event with a twin in the system profile is a duplicate
    sys_keys: dict[tuple[str, str, int, int], int] = {}
    for key, srows in sys_groups.items():
        for r in srows:
            sys_keys[(key[0], key[1], key[2], raw.start[r])] = r
    k_matched: set[int] = set()
    s_matched: set[int] = set()
    for key, krows in k_groups.items():
        for j in krows:
            twin = sys_keys.get((key[0], key[1], key[2], k["start"][j] + offset))
            if twin is not None and twin not in s_matched:
                k_matched.add(j)
                s_matched.add(twin)
    return offset, len(s_matched), k_matched, s_matched


def merge_framework(
    raw: Raw,
    parsed: KinetoParse,
    origin: str,
    pid_instance: dict[str, str],
    alignment: dict[str, Any],
) -> None:
    k = kineto_rows(parsed)
    pids = sorted({p for p, s in zip(k["pid"], k["source"], strict=True) if s == "framework"})
    offsets: dict[str, int] = {}
    matched: set[int] = set()
    n_matched = 0
    for pid in pids:
        if pid not in pid_instance:
            continue
        off, n, km, _ = _framework_offset(raw, k, pid)
        if off is not None:
            offsets[pid] = off
            matched |= km
            n_matched += n
    offset = Counter(offsets.values()).most_common(1)[0][0] if offsets else 0
    alignment.setdefault("framework_traces", []).append(
        {
            "path": origin,
            "offset_ns": offset,
            "offsets_by_pid": offsets,
            "matched_events": n_matched,
            "method": "framework events in both (same name, thread, duration): most common "
            "start difference"
            if offsets
            else "no framework event in both: not shifted",
        }
    )
    for j in range(len(k["name"])):
        if j in matched:
            continue
        pid = k["pid"][j]
        off = offsets.get(pid, offset)
        lane = k["lane"][j]
        instance = pid_instance.get(pid)
        if instance is not None and k["source"][j] in ("framework", "runtime"):
            lane = f"{instance}/PID:{pid}/framework/TID:{k['tid'][j]}"
        raw.add_kineto(k, j, shift=off, lane=lane, instance=instance or "")
