"""Diff two analysed traces (``opscope.diff/1``): per op, per kernel, the timeline, findings.

Per op: calls, device self time and CPU self time in A and B, and the deltas.  Ops present on
one side only have ``null`` on the other and count with zero there, so the per-op deltas add up
exactly to the difference of the totals (the sum of the op table's device/CPU self columns).
Comparing traces from different devices is allowed - cross-vendor comparisons are useful - and
labelled (``cross_device``).

Matching across vendors: ops and kernels are matched by name; a name left unmatched on both
sides is then matched by its vendor-neutral runtime key (:mod:`opscope.analysis.runtime_names`:
``cudaDeviceSynchronize`` and ``hipDeviceSynchronize`` are one call), when that key is unique on
each side.  Findings are matched by rule and subject - the op (``details.op``/``details.name``), the
runtime call and its issuing op chain (``details.call``/``details.issued_by``), else the title with
its numbers blanked - with runtime names replaced by their keys; two findings of one rule on the
same subject are paired in rank order.  Names are shown as recorded: a matched pair spelled
differently shows both (``cudaDeviceSynchronize / hipDeviceSynchronize``).
"""

from __future__ import annotations

import re
from typing import Any

from opscope.analysis.report import Report
from opscope.analysis.runtime_names import both_spellings, canonical, display, neutral_text

SCHEMA = "opscope.diff/1"
_NUMBER = re.compile(r"[-+]?\d[\d.,]*\s*(?:[µm]?s|%|×|x)?")


# a step over this many times the median of the others is an outlier
OUTLIER_RATIO = 2.0


def _step_walls(d: dict[str, Any]) -> list[dict[str, Any]]:
    """Per profiler step of the analysed window: its wall time (in a job: the slowest rank's)."""
    walls: dict[int, float] = {}
    for s in d.get("steps") or []:
        walls[s["step"]] = max(walls.get(s["step"], 0.0), float(s["wall_us"]))
    return [{"step": k, "wall_us": walls[k]} for k in sorted(walls)]


def _median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _outliers(steps: list[dict[str, Any]]) -> list[int]:
    """The steps over :data:`OUTLIER_RATIO` times the median of the other steps."""
    out = []
    for i, s in enumerate(steps):
        others = [t["wall_us"] for j, t in enumerate(steps) if j != i]
        if others and s["wall_us"] > OUTLIER_RATIO * _median(others):
            out.append(int(s["step"]))
    return out


def _step_comparison(sa: dict[str, Any], sb: dict[str, Any]) -> dict[str, Any]:
    """The median step time of each side and its delta, and the warnings that say when a
    side's steps cannot carry a comparison (one step, or an outlier step)."""
    warnings: list[str] = []
    medians: dict[str, float | None] = {}
    for label, side in (("A", sa), ("B", sb)):
        steps = side["steps"]
        walls = [s["wall_us"] for s in steps]
        medians[label] = _median(walls) if walls else None
        if len(steps) == 1:
            warnings.append(
                f"{label} has one profiler step (step {steps[0]['step']}): one step's time "
                "includes one-off costs (warm-up, compilation, a stall); profile several steps "
                "for a comparison that holds"
            )
        for step in _outliers(steps):
            wall = next(s["wall_us"] for s in steps if s["step"] == step)
            others = _median([s["wall_us"] for s in steps if s["step"] != step])
            warnings.append(
                f"{label}'s step {step} is an outlier: {wall / others:.1f}x the median of its "
                "other steps; the totals include it, the median step time resists it"
            )
    ma, mb = medians["A"], medians["B"]
    return {
        "median_step_us": {"a": ma, "b": mb},
        "delta_median_step_us": None if ma is None or mb is None else mb - ma,
        "warnings": warnings,
    }


def _side_summary(r: Report) -> dict[str, Any]:
    d = r.to_dict()
    return {
        "paths": d["source"]["paths"],
        "device": d["device"],
        "events": d["source"]["events"],
        "summary": d["summary"],
        "steps": _step_walls(d),
        "device_total_us": sum(o.device_self_us for o in r.ops.rows),
        "cpu_total_us": sum(o.cpu_self_us for o in r.ops.rows),
    }


def _finding_key(f: dict[str, Any]) -> tuple[str, str]:
    details = f.get("details") or {}
    call = details.get("call")
    if isinstance(call, str) and call:
        subject = f"{canonical(call)} from {details.get('issued_by') or ''}"
    else:
        subject = str(
            details.get("op") or details.get("name") or _NUMBER.sub("#", str(f.get("title", "")))
        )
    return str(f.get("kind", "")), neutral_text(subject)


def _pair_names(names_a: set[str], names_b: set[str]) -> list[tuple[str | None, str | None]]:
    """(name in A, name in B) pairs, sorted by shown name: equal names first, then names left
    over on both sides whose runtime key is the same and unique on each side."""
    pairs: list[tuple[str | None, str | None]] = [(n, n) for n in names_a & names_b]
    left_a, left_b = names_a - names_b, names_b - names_a
    by_key_a: dict[str, list[str]] = {}
    by_key_b: dict[str, list[str]] = {}
    for n in left_a:
        by_key_a.setdefault(canonical(n), []).append(n)
    for n in left_b:
        by_key_b.setdefault(canonical(n), []).append(n)
    for key, xs in by_key_a.items():
        ys = by_key_b.get(key, [])
        if len(xs) == 1 and len(ys) == 1:
            pairs.append((xs[0], ys[0]))
            left_a.discard(xs[0])
            left_b.discard(ys[0])
    pairs += [(n, None) for n in left_a] + [(None, n) for n in left_b]
    return sorted(pairs, key=lambda p: display(p[0], p[1]))


def _named(row: dict[str, Any], x: str | None, y: str | None) -> dict[str, Any]:
    out = {"name": display(x, y), **row}
    if x is not None and y is not None and x != y:
        out["names"] = {"a": x, "b": y}
    return out


def _match_findings(
    fa: list[dict[str, Any]], fb: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[dict[str, Any], dict[str, Any]]]]:
    """(resolved, new, matched pairs): findings paired by :func:`_finding_key`, first with first
    (each side in rank order); the pairs in B's order."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in fb:
        by_key.setdefault(_finding_key(f), []).append(f)
    resolved: list[dict[str, Any]] = []
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for f in fa:
        same = by_key.get(_finding_key(f))
        if same:
            pairs.append((f, same.pop(0)))
        else:
            resolved.append(f)
    rank_b = {id(f): i for i, f in enumerate(fb)}
    pairs.sort(key=lambda p: rank_b[id(p[1])])
    paired_b = {id(y) for _, y in pairs}
    new = [f for f in fb if id(f) not in paired_b]
    return resolved, new, pairs


def _matched(x: dict[str, Any], y: dict[str, Any]) -> dict[str, Any]:
    """One finding present in both: B's title with runtime names A spells differently shown both
    ways, and what is at stake on each side."""
    title = both_spellings(str(y.get("title", "")), str(x.get("title", "")))
    sa, sb = float(x.get("time_at_stake_us") or 0.0), float(y.get("time_at_stake_us") or 0.0)
    return {
        "kind": y.get("kind"),
        "title": title,
        "renamed": title != y.get("title"),
        "a": {k: x.get(k) for k in ("id", "title", "severity", "time_at_stake_us", "share")},
        "b": {k: y.get(k) for k in ("id", "title", "severity", "time_at_stake_us", "share")},
        "delta_time_at_stake_us": sb - sa,
    }


def _num(value: Any) -> Any:
    """``value`` when it is a number (not a bool), else None."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def diff_reports(a: Report, b: Report) -> dict[str, Any]:
    ops_a = {o.name: o for o in a.ops.rows}
    ops_b = {o.name: o for o in b.ops.rows}
    ops: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []

    def side(o: Any) -> dict[str, Any] | None:
        if o is None:
            return None
        return {
            "calls": o.calls,
            "device_self_us": o.device_self_us,
            "cpu_self_us": o.cpu_self_us,
            "device_total_us": o.device_total_us,
        }

    op_pairs = _pair_names(set(ops_a), set(ops_b))
    for x, y in op_pairs:
        oa = ops_a[x] if x is not None else None
        ob = ops_b[y] if y is not None else None
        ops.append(
            _named(
                {
                    "a": side(oa),
                    "b": side(ob),
                    "delta_device_us": (ob.device_self_us if ob else 0.0)
                    - (oa.device_self_us if oa else 0.0),
                    "delta_cpu_us": (ob.cpu_self_us if ob else 0.0)
                    - (oa.cpu_self_us if oa else 0.0),
                    "delta_calls": (ob.calls if ob else 0) - (oa.calls if oa else 0),
                },
                x,
                y,
            )
        )
    ops.sort(
        key=lambda r: (-abs(float(r["delta_device_us"])), -abs(float(r["delta_cpu_us"])), r["name"])
    )

    ka = {k.name: k for k in a.kernels}
    kb = {k.name: k for k in b.kernels}
    for xn, yn in _pair_names(set(ka), set(kb)):
        kx = ka[xn] if xn is not None else None
        ky = kb[yn] if yn is not None else None
        kernels.append(
            _named(
                {
                    "a": None if kx is None else {"calls": kx.calls, "device_us": kx.device_us},
                    "b": None if ky is None else {"calls": ky.calls, "device_us": ky.device_us},
                    "delta_device_us": (ky.device_us if ky else 0.0)
                    - (kx.device_us if kx else 0.0),
                },
                xn,
                yn,
            )
        )
    kernels.sort(key=lambda r: (-abs(float(r["delta_device_us"])), str(r["name"])))

    sa, sb = _side_summary(a), _side_summary(b)
    # a figure one side lacks (no communication on b: exposed_comm_us is null) has no delta
    timeline_delta: dict[str, Any] = {}
    for k, v in sa["summary"].items():
        if _num(v) is None or k in ("start_ns", "end_ns"):
            continue
        other = _num(sb["summary"].get(k))
        timeline_delta[k] = None if other is None else other - v
    resolved, new, matched = _match_findings(
        [f.to_dict() for f in a.findings], [f.to_dict() for f in b.findings]
    )
    return {
        "schema": SCHEMA,
        "a": sa,
        "b": sb,
        "cross_device": (sa["device"]["kind"], sa["device"]["name"])
        != (sb["device"]["kind"], sb["device"]["name"]),
        "totals": {
            "delta_device_us": sb["device_total_us"] - sa["device_total_us"],
            "delta_cpu_us": sb["cpu_total_us"] - sa["cpu_total_us"],
        },
        "timeline_delta": timeline_delta,
        "steps": _step_comparison(sa, sb),
        "ops": ops,
        "only_in_a": sorted(x for x, y in op_pairs if y is None and x is not None),
        "only_in_b": sorted(y for x, y in op_pairs if x is None and y is not None),
        "kernels": kernels,
        "findings": {
            "resolved": resolved,
            "new": new,
            "persisting": [y for _, y in matched],
            "matched": [_matched(x, y) for x, y in matched],
        },
    }
