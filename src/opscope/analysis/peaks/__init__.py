"""Device peaks for rooflines: dense FLOP/s per dtype and memory bandwidth.

Accelerators come from the documented table ``peaks.json`` (every entry names its public
source), matched on the trace's device name and ``deviceProperties``; the CPU is measured once
by a short NumPy microbenchmark (:mod:`opscope.analysis.peaks.cpu`) and cached.  A user JSON
file - ``$OPSCOPE_PEAKS`` or the ``overrides`` argument - with the same layout replaces or adds
entries by key, and its optional ``"use": "<key>"`` forces the entry for every trace (for a
device whose name the table does not know).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from opscope.analysis.peaks.device import DevicePeaks
from opscope.errors import OpscopeError


def _entry_peaks(key: str, e: dict[str, Any]) -> DevicePeaks:
    try:
        flops = {str(k): float(v) * 1e12 for k, v in (e.get("tflops") or {}).items()}
        bandwidth = float(e["bandwidth_gbs"]) * 1e9
    except (KeyError, TypeError, ValueError) as exc:
        raise OpscopeError(f"peaks entry {key!r}: needs tflops and bandwidth_gbs ({exc})") from None
    extra = {k: e[k] for k in ("neuron_cores",) if k in e}
    return DevicePeaks(
        key=key,
        name=str(e.get("name", key)),
        flops=flops,
        bandwidth=bandwidth,
        source=str(e.get("source", "user file")),
        note=e.get("note"),
        measured=bool(e.get("measured", False)),
        extra=extra,
    )


def builtin_table() -> dict[str, Any]:
    """The shipped ``peaks.json``, decoded (read beside this module: the package has C
    extensions, so it is never imported from a zip, and ``importlib.resources`` would import
    ``zipfile`` to find it)."""
    text = Path(__file__).with_name("peaks.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def load_table(overrides: str | Path | dict[str, Any] | None = None) -> dict[str, Any]:
    """The table with a user's entries merged in: ``overrides`` (a path or a decoded dict),
    else the file named by ``$OPSCOPE_PEAKS``.  User entries are tried before built-in ones;
    a user entry with a built-in key updates its fields (``tflops`` merged per dtype)."""
    table = builtin_table()
    user = overrides if overrides is not None else os.environ.get("OPSCOPE_PEAKS") or None
    if user is None:
        return table
    if not isinstance(user, dict):
        path = Path(user)
        try:
            user = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise OpscopeError(f"peaks file {path}: {exc}") from None
    if not isinstance(user, dict) or not isinstance(user.get("devices", {}), dict):
        raise OpscopeError("peaks file: expected {'devices': {key: entry}}")
    merged: dict[str, Any] = {}
    builtin = table["devices"]
    for key, e in user.get("devices", {}).items():
        base = dict(builtin.get(key, {}))
        tflops = {**base.get("tflops", {}), **(e.get("tflops") or {})}
        base.update(e)
        base["tflops"] = tflops
        base.setdefault("source", "user file")
        merged[key] = base
    for key, e in builtin.items():
        merged.setdefault(key, e)
    out = dict(table)
    out["devices"] = merged
    if "use" in user:
        out["use"] = user["use"]
    return out


def _props_match(cond: dict[str, Any], name: str, props: dict[str, Any]) -> bool:
    if "name" in cond and not re.search(cond["name"], name):
        return False
    if "compute" in cond:
        major, minor = props.get("computeMajor"), props.get("computeMinor")
        if major is None or f"{major}.{minor}" != cond["compute"]:
            return False
    if "cus" in cond:
        cus = props.get("numSms", props.get("multiProcessorCount"))
        if cus != cond["cus"]:
            return False
    mem = props.get("totalGlobalMem")
    if "memory_gb_min" in cond and (mem is None or mem / 1e9 < cond["memory_gb_min"]):
        return False
    return not ("memory_gb_max" in cond and (mem is None or mem / 1e9 > cond["memory_gb_max"]))


def match_device(
    name: str,
    properties: dict[str, Any] | None = None,
    table: dict[str, Any] | None = None,
) -> DevicePeaks | None:
    """The table entry for a device ``name`` (as in ``deviceProperties``) or None.

    ``deviceProperties`` conditions are tried first (they identify a device whose marketing
    name is generic, e.g. ``AMD Radeon Graphics`` for an MI250 GCD), then name patterns.
    """
    table = table if table is not None else load_table()
    devices: dict[str, Any] = table.get("devices", {})
    forced = table.get("use")
    if forced:
        if forced not in devices:
            raise OpscopeError(f"peaks file: 'use' names unknown entry {forced!r}")
        return _entry_peaks(forced, devices[forced])
    low = " ".join(name.lower().split())
    props = properties or {}
    if props:
        for key, e in devices.items():
            if any(_props_match(c, low, props) for c in e.get("match_props", [])):
                return _entry_peaks(key, e)
    if not low:
        return None
    for key, e in devices.items():
        if any(re.search(p, low) for p in e.get("match", [])):
            return _entry_peaks(key, e)
    return None


def device_peaks(
    kind: str,
    name: str,
    properties: dict[str, Any] | None = None,
    overrides: str | Path | dict[str, Any] | None = None,
    *,
    measure_cpu: bool = True,
) -> DevicePeaks | None:
    """Peaks of the device a trace ran on (``trace.device.kind``/``.name`` and the first
    ``deviceProperties`` entry), or None when unknown.

    For the CPU: a user entry keyed ``cpu`` if given, else the cached measurement (measured
    now, about a second, when there is none and ``measure_cpu``).
    """
    table = load_table(overrides)
    if kind == "cpu":
        if "cpu" in table["devices"]:
            return _entry_peaks("cpu", table["devices"]["cpu"])
        if not measure_cpu:
            from opscope.analysis.peaks.cpu import cached_cpu_peaks

            return cached_cpu_peaks()
        from opscope.analysis.peaks.cpu import cpu_peaks

        return cpu_peaks()
    return match_device(name, properties, table)


def interconnect(
    name: str,
    properties: dict[str, Any] | None = None,
    overrides: str | Path | dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The GPU-to-GPU link of a device (``{"name", "gbs", "source"}``: ``gbs`` the peak per
    direction, GB/s, over all of the device's links), or None when the table does not say."""
    table = load_table(overrides)
    found = match_device(name, properties, table)
    if found is None:
        return None
    link = table["devices"].get(found.key, {}).get("interconnect")
    if not isinstance(link, dict) or not isinstance(link.get("gbs"), (int, float)):
        return None
    return {
        "name": str(link.get("name", "")),
        "gbs": float(link["gbs"]),
        "source": str(link.get("source", "")),
    }


__all__ = [
    "DevicePeaks",
    "builtin_table",
    "device_peaks",
    "interconnect",
    "load_table",
    "match_device",
]
