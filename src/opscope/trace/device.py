"""Which device a trace's device work ran on, from its categories, names and metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow.compute as pc

from opscope.trace.model import DeviceInfo

if TYPE_CHECKING:
    from opscope.trace.model import Trace


def detect_device(trace: Trace) -> DeviceInfo:
    cats = {
        str(c).lower()
        for c in pc.unique(trace.events.column("cat").cast("string")).to_pylist()
        if c
    }
    sources = set(pc.unique(trace.events.column("source").cast("string")).to_pylist())
    props = trace.meta.device_properties
    name = ""
    if props and isinstance(props[0], dict):
        name = str(props[0].get("name", ""))
    hinted = trace.meta.extra.get("device_kind")
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
        rocm = any(isinstance(p, dict) and "gcnArchName" in p for p in props) or any(
            n.startswith("hip")
            for n in pc.unique(
                trace.events.filter(
                    pc.equal(trace.events.column("source").cast("string"), "runtime")
                )
                .column("name")
                .cast("string")
            ).to_pylist()[:200]
            if n
        )
        if rocm:
            return DeviceInfo("rocm", name or "AMD GPU", max(1, len(props)))
        return DeviceInfo("cuda", name or "GPU", max(1, len(props)))
    return DeviceInfo("cpu", "CPU", 1)
