"""Which device a trace's device work ran on, from its categories, names and metadata.

Reads the event table and the metadata fields it needs, not a :class:`~opscope.trace.model.Trace`
(the model imports this module, not the reverse).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from opscope.trace.arrays import Codes, distinct


@dataclass
class DeviceInfo:
    """Which device the trace's device work ran on, as far as the trace tells."""

    kind: str  # cpu | cuda | rocm | xpu | mtia | neuron | privateuse1
    name: str
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "count": self.count}


def detect_device(
    events: pa.Table,
    device_properties: list[dict[str, Any]],
    extra: Mapping[str, Any],
    *,
    truncated: bool = False,
) -> DeviceInfo:
    """The device of a trace: its ``events``, and from its metadata the
    ``device_properties`` and ``extra`` (a ``device_kind`` written at capture wins);
    ``truncated``: the file was cut short, so its named devices count without device events."""
    cats = {c.lower() for c in distinct(events.column("cat")) if c}
    sources = set(distinct(events.column("source")))
    props = device_properties
    name = ""
    if props and isinstance(props[0], dict):
        name = str(props[0].get("name", ""))
    hinted = extra.get("device_kind")
    if isinstance(hinted, str) and hinted:
        return DeviceInfo(kind=hinted, name=name or hinted, count=max(1, len(props)))
    if "neuron_hw" in cats or "neuron_rt" in cats:
        return DeviceInfo("neuron", name or "Neuron", max(1, len(props)))
    if cats & {"privateuse1_runtime", "privateuse1_driver"}:
        return DeviceInfo("privateuse1", name or "PrivateUse1 device", max(1, len(props)))
    if cats & {"mtia_runtime", "mtia_driver", "mtia_ccp_events"}:
        return DeviceInfo("mtia", name or "MTIA", max(1, len(props)))
    if cats & {"xpu_runtime", "xpu_driver"}:
        return DeviceInfo("xpu", name or "XPU", max(1, len(props)))
    if "device" in sources or cats & {"cuda_runtime", "cuda_driver", "runtime"}:
        runtime = Codes.of(events.column("source")).eq("runtime")
        rocm = any(isinstance(p, dict) and "gcnArchName" in p for p in props) or any(
            n.startswith("hip") for n in distinct(events.column("name"), runtime)
        )
        if rocm:
            return DeviceInfo("rocm", name or "AMD GPU", max(1, len(props)))
        return DeviceInfo("cuda", name or "GPU", max(1, len(props)))
    if truncated and name:
        # a file cut before its device events (kineto writes them after the host's): the
        # device properties at its head still say which device ran it
        rocm = any(isinstance(p, dict) and "gcnArchName" in p for p in props)
        return DeviceInfo("rocm" if rocm else "cuda", name, max(1, len(props)))
    return DeviceInfo("cpu", "CPU", 1)
