"""Device peaks: the shipped table, matching by name and deviceProperties, user overrides, the
measured CPU peaks and their cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opscope.analysis.peaks import builtin_table, device_peaks, interconnect, match_device
from opscope.analysis.peaks import cpu as cpu_mod
from opscope.errors import OpscopeError


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Tesla V100-SXM2-32GB", "v100-sxm2"),
        ("Tesla V100-PCIE-16GB", "v100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie"),
        ("Tesla V100S-PCIE-32GB", "v100s-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA B200", "b200"),
        ("AMD Instinct MI250X", "mi250x-gcd"),
        ("AMD Instinct MI300X VF", "mi300x"),
        ("AMD Instinct MI325X", "mi325x"),
        ("AMD Instinct MI350X", "mi350x"),
        ("trn1.32xlarge", "trainium1"),
        ("AWS Trainium2", "trainium2"),
        ("Trainium3", "trainium3"),
        ("inf2.48xlarge", "inferentia2"),
    ],
)
def test_names_match(name: str, key: str) -> None:
    p = match_device(name)
    assert p is not None and p.key == key


def test_unknown_device_has_no_peaks() -> None:
    assert match_device("ARTEMIS") is None
    assert match_device("") is None
    # "l4" only as a word of its own: not an L40, not an RTX A4000's "a4", not "l40s"
    assert match_device("NVIDIA L40") is None
    assert match_device("NVIDIA RTX A4000") is None


# the link peak per direction (GB/s) of each device the datasheets give one for: the figures
# as the vendors state them (both directions) halved, or the stated per-direction figure
LINKS = [
    ("Tesla V100-SXM2-16GB", "NVLink 2 (6 links)", 150),
    ("Tesla V100-PCIE-32GB", "PCIe Gen3 x16", 16),
    ("Tesla V100S-PCIE-32GB", "PCIe Gen3 x16", 16),
    ("NVIDIA A100-SXM4-40GB", "NVLink 3 (12 links)", 300),
    ("NVIDIA A100-SXM4-80GB", "NVLink 3 (12 links)", 300),
    ("NVIDIA A100-PCIE-40GB", "NVLink bridge (2 GPUs)", 300),
    ("NVIDIA A100 80GB PCIe", "NVLink bridge (2 GPUs)", 300),
    ("NVIDIA H100 PCIe", "NVLink bridge (2 GPUs)", 300),
    ("NVIDIA H100 NVL", "NVLink bridge (2 GPUs)", 300),
    ("NVIDIA H100 80GB HBM3", "NVLink 4 (18 links)", 450),
    ("NVIDIA H200", "NVLink 4 (18 links)", 450),
    ("NVIDIA L4", "PCIe Gen4 x16 (no NVLink)", 32),
    ("NVIDIA L40S", "PCIe Gen4 x16 (no NVLink)", 32),
    ("AMD Instinct MI210", "Infinity Fabric bridge (3 links)", 150),
    ("AMD Instinct MI300X", "Infinity Fabric / xGMI (7 links)", 448),
    ("AWS Trainium2 (trn2.48xlarge)", "NeuronLink-v3 (4 links)", 640),
]


@pytest.mark.parametrize(("name", "link", "gbs"), LINKS)
def test_interconnect_per_direction(name: str, link: str, gbs: float) -> None:
    got = interconnect(name)
    assert got is not None and (got["name"], got["gbs"]) == (link, gbs)
    # every figure says where it comes from and which direction it counts
    assert "each way" in got["source"]
    assert "http" in got["source"] or "aws-neuron-sdk" in got["source"]


@pytest.mark.parametrize(
    "name",
    # no stated per-device figure: an MI250X/MI250 GCD (AMD states the package's links),
    # Trainium (NeuronLink-v2 without a figure), B200/MI325X/MI355X not added yet
    ["AMD Instinct MI250X", "AMD Instinct MI250", "trn1.32xlarge", "NVIDIA B200", "ARTEMIS"],
)
def test_no_interconnect_where_no_figure_is_stated(name: str) -> None:
    assert interconnect(name) is None


def test_every_link_of_the_table_is_tested() -> None:
    with_link = {k for k, e in builtin_table()["devices"].items() if "interconnect" in e}
    tested = {match_device(name).key for name, _l, _g in LINKS}  # type: ignore[union-attr]
    assert with_link == tested


def test_device_properties_identify_generic_names() -> None:
    # an MI250 GCD reports itself as "AMD Radeon Graphics"
    p = match_device("AMD Radeon Graphics", {"computeMajor": 9, "computeMinor": 0, "numSms": 104})
    assert p is not None and p.key == "mi250-gcd"
    big = {"computeMajor": 9, "computeMinor": 4, "numSms": 304, "totalGlobalMem": 274_877_906_944}
    p = match_device("AMD Instinct MI300X", big)  # 256 GiB: an MI325X whatever its name says
    assert p is not None and p.key == "mi325x"
    p = match_device("NVIDIA A100-PG509-200", {"totalGlobalMem": 85_000_000_000})
    assert p is not None and p.key == "a100-80gb"


def test_numbers_are_dense_and_units_converted() -> None:
    h100 = match_device("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    assert h100.flops["bf16"] == pytest.approx(989.5e12)
    assert h100.bandwidth == pytest.approx(3.35e12)
    assert h100.peak_flops("bf16") == h100.flops["bf16"]
    assert h100.peak_flops("bf16", matrix=False) == h100.flops["fp32"]
    assert h100.ridge("bf16") == pytest.approx(989.5e12 / 3.35e12)
    v100 = match_device("Tesla V100-SXM2-16GB")
    assert v100 is not None and v100.peak_flops("bf16") == v100.flops["fp32"]  # no bf16 units
    mi300 = match_device("AMD Instinct MI300X")
    assert mi300 is not None and mi300.peak_flops("fp8") == pytest.approx(2614.9e12)


def test_every_entry_is_sourced_and_complete() -> None:
    for key, e in builtin_table()["devices"].items():
        assert e.get("source"), key
        assert e["bandwidth_gbs"] > 0, key
        assert e["tflops"].get("fp32", 0) > 0, key
        assert e.get("match") or e.get("match_props"), key


def test_user_file_overrides_and_adds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "peaks.json"
    f.write_text(
        json.dumps(
            {
                "devices": {
                    "h100-sxm": {"bandwidth_gbs": 3000, "tflops": {"bf16": 700}},
                    "artemis": {"match": ["artemis"], "tflops": {"fp32": 10}, "bandwidth_gbs": 100},
                }
            }
        )
    )
    monkeypatch.setenv("OPSCOPE_PEAKS", str(f))
    h = device_peaks("cuda", "NVIDIA H100 80GB HBM3")
    assert h is not None and h.bandwidth == 3e12 and h.flops["bf16"] == 700e12
    assert h.flops["fp8"] == pytest.approx(1979e12)  # untouched fields stay
    a = device_peaks("mtia", "ARTEMIS")
    assert a is not None and a.key == "artemis" and a.source == "user file"
    # an argument wins over the environment; "use" forces an entry
    forced = device_peaks("cuda", "whatever", overrides={"use": "b200"})
    assert forced is not None and forced.key == "b200"


def test_bad_user_file_is_a_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text("{not json")
    with pytest.raises(OpscopeError, match="peaks file"):
        device_peaks("cuda", "NVIDIA H100", overrides=f)
    with pytest.raises(OpscopeError, match="unknown entry"):
        device_peaks("cuda", "x", overrides={"use": "nope"})


def test_cpu_peaks_are_cached_per_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    calls: list[int] = []

    def fake_measure(budget_s: float = 0.6) -> dict[str, float]:
        calls.append(1)
        return {"fp32_flops": 1e11, "bandwidth": 2e10}

    monkeypatch.setattr(cpu_mod, "measure", fake_measure)
    assert cpu_mod.cached_cpu_peaks() is None
    p = device_peaks("cpu", "CPU")
    assert p is not None and p.measured and p.flops["fp32"] == 1e11 and p.bandwidth == 2e10
    assert (tmp_path / "peaks" / "cpu.json").is_file()
    again = device_peaks("cpu", "CPU")
    assert again == p and len(calls) == 1  # read from the cache
    monkeypatch.setattr(cpu_mod, "machine_key", lambda: "another machine")
    assert cpu_mod.cached_cpu_peaks() is None
    device_peaks("cpu", "CPU")
    assert len(calls) == 2
    # a user "cpu" entry replaces the measurement
    user = device_peaks(
        "cpu", "CPU", overrides={"devices": {"cpu": {"tflops": {"fp32": 3}, "bandwidth_gbs": 50}}}
    )
    assert user is not None and not user.measured and user.flops["fp32"] == 3e12


def test_cpu_microbenchmark_measures_something(tmp_path: Path) -> None:
    values = cpu_mod.measure(budget_s=0.05, n=128, copy_mib=2)
    assert values["fp32_flops"] > 1e8  # any CPU does >0.1 GFLOP/s
    assert values["bandwidth"] > 1e8
