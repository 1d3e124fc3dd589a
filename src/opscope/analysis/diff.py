"""Diff two analysed traces (``opscope.diff/1``): per op, per kernel, the timeline, findings.

Per op: calls, device self time and CPU self time in A and B, and the deltas.  Ops present on
one side only have ``null`` on the other and count with zero there, so the per-op deltas add up
exactly to the difference of the totals (the sum of the op table's device/CPU self columns).
Comparing traces from different devices is allowed - cross-vendor comparisons are useful - and
labelled (``cross_device``).
"""

from __future__ import annotations

import re
from typing import Any

from opscope.analysis.report import Report

SCHEMA = "opscope.diff/1"
_NUMBER = re.compile(r"[-+]?\d[\d.,]*\s*(?:[µm]?s|%|×|x)?")


def _side_summary(r: Report) -> dict[str, Any]:
    d = r.to_dict()
    return {
        "paths": d["source"]["paths"],
        "device": d["device"],
        "events": d["source"]["events"],
        "summary": d["summary"],
        "device_total_us": sum(o.device_self_us for o in r.ops.rows),
        "cpu_total_us": sum(o.cpu_self_us for o in r.ops.rows),
    }


def _finding_key(f: dict[str, Any]) -> tuple[str, str]:
    details = f.get("details") or {}
    subject = details.get("op") or details.get("name") or _NUMBER.sub("#", str(f.get("title", "")))
    return str(f.get("kind", "")), str(subject)


def diff_reports(a: Report, b: Report) -> dict[str, Any]:
    ops_a = {o.name: o for o in a.ops.rows}
    ops_b = {o.name: o for o in b.ops.rows}
    ops: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []
    for name in sorted(set(ops_a) | set(ops_b)):
        oa, ob = ops_a.get(name), ops_b.get(name)

        def side(o: Any) -> dict[str, Any] | None:
            if o is None:
                return None
            return {
                "calls": o.calls,
                "device_self_us": o.device_self_us,
                "cpu_self_us": o.cpu_self_us,
                "device_total_us": o.device_total_us,
            }

        ops.append(
            {
                "name": name,
                "a": side(oa),
                "b": side(ob),
                "delta_device_us": (ob.device_self_us if ob else 0.0)
                - (oa.device_self_us if oa else 0.0),
                "delta_cpu_us": (ob.cpu_self_us if ob else 0.0) - (oa.cpu_self_us if oa else 0.0),
                "delta_calls": (ob.calls if ob else 0) - (oa.calls if oa else 0),
            }
        )
    ops.sort(
        key=lambda r: (-abs(float(r["delta_device_us"])), -abs(float(r["delta_cpu_us"])), r["name"])
    )

    ka = {k.name: k for k in a.kernels}
    kb = {k.name: k for k in b.kernels}
    for name in sorted(set(ka) | set(kb)):
        x, y = ka.get(name), kb.get(name)
        kernels.append(
            {
                "name": name,
                "a": None if x is None else {"calls": x.calls, "device_us": x.device_us},
                "b": None if y is None else {"calls": y.calls, "device_us": y.device_us},
                "delta_device_us": (y.device_us if y else 0.0) - (x.device_us if x else 0.0),
            }
        )
    kernels.sort(key=lambda r: (-abs(float(r["delta_device_us"])), str(r["name"])))

    sa, sb = _side_summary(a), _side_summary(b)
    timeline_delta = {
        k: sb["summary"][k] - sa["summary"][k]
        for k in sa["summary"]
        if isinstance(sa["summary"][k], (int, float))
        and not isinstance(sa["summary"][k], bool)
        and k not in ("start_ns", "end_ns")
    }
    fa = {_finding_key(f): f for f in a.findings}
    fb = {_finding_key(f): f for f in b.findings}
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
        "ops": ops,
        "only_in_a": sorted(set(ops_a) - set(ops_b)),
        "only_in_b": sorted(set(ops_b) - set(ops_a)),
        "kernels": kernels,
        "findings": {
            "resolved": [fa[k] for k in fa if k not in fb],
            "new": [fb[k] for k in fb if k not in fa],
            "persisting": [fb[k] for k in fb if k in fa],
        },
    }
