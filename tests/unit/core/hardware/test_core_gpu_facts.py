"""GPU product labels normalise to one name with the facts the planner needs."""

from __future__ import annotations

import pytest

from latency_tuner.core.hardware import (
    KNOWN_GPUS,
    BandwidthClass,
    HardwareInfo,
    normalize_gpu_product,
)
from latency_tuner.hardware import GPUS
from latency_tuner.simulator.hardware import get_gpu


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("NVIDIA-H100-80GB-HBM3", "H100-SXM"),
        ("NVIDIA-H100-PCIe", "H100-PCIe"),
        ("NVIDIA-H100-NVL", "H100-NVL"),
        ("H100-SXM", "H100-SXM"),
        ("h100", "H100-SXM"),
        ("NVIDIA-H200", "H200"),
        ("NVIDIA-H200-NVL", "H200-NVL"),
        ("NVIDIA-GH200-480GB", "H200"),
        ("NVIDIA-B200", "B200"),
        ("NVIDIA-A100-SXM4-80GB", "A100-80G"),
        ("NVIDIA-A100-SXM4-40GB", "A100-40G"),
        ("NVIDIA-A100-PCIE-40GB", "A100-40G-PCIe"),
        ("A100-80G", "A100-80G"),
        ("A100", "A100-40G"),  # memory not stated: the smaller card, never the optimistic one
        ("A100-80G-PCIe", "A100-80G-PCIe"),
        ("NVIDIA-A100-PCIE-80GB", "A100-80G-PCIe"),
        ("NVIDIA-L40S", "L40S"),
        ("NVIDIA-L40", "L40"),
        ("NVIDIA-L4", "L4"),
        ("NVIDIA-A10G", "A10G"),
        ("NVIDIA-A10", "A10"),
        ("Tesla-T4", "T4"),
        ("Tesla-V100-SXM2-32GB", "V100-SXM"),
        ("Tesla-V100-PCIE-32GB", "V100-PCIe"),
    ],
)
def test_node_labels_and_short_names_normalise_to_one_canonical_gpu(label: str, name: str) -> None:
    assert normalize_gpu_product(label) == name


def test_an_unknown_product_normalises_to_none_and_knows_nothing() -> None:
    hw = HardwareInfo.from_labels("NVIDIA-GeForce-RTX-4090")
    assert hw.gpu_product is None
    assert hw.facts is None
    assert hw.supports_fp8 is None
    assert hw.bandwidth_class is None
    assert hw.effective_interconnect is None
    assert hw.higher_bandwidth_gpus() == ()
    assert hw.describe() == "an unknown GPU"


@pytest.mark.parametrize(
    ("label", "fp8"),
    [
        ("NVIDIA-H100-80GB-HBM3", True),
        ("NVIDIA-H200", True),
        ("NVIDIA-L40S", True),
        ("NVIDIA-L4", True),
        ("NVIDIA-B200", True),
        ("NVIDIA-A100-SXM4-80GB", False),
        ("NVIDIA-A10G", False),
        ("Tesla-T4", False),
    ],
)
def test_fp8_support_follows_the_architecture(label: str, fp8: bool) -> None:
    assert HardwareInfo.from_labels(label).supports_fp8 is fp8


def test_bandwidth_classes_separate_hbm3_hbm2_and_gddr() -> None:
    assert HardwareInfo.from_labels("NVIDIA-H100-80GB-HBM3").bandwidth_class is BandwidthClass.HIGH
    assert (
        HardwareInfo.from_labels("NVIDIA-A100-SXM4-80GB").bandwidth_class is BandwidthClass.MEDIUM
    )
    assert HardwareInfo.from_labels("NVIDIA-L40S").bandwidth_class is BandwidthClass.LOW


def test_higher_bandwidth_advice_names_each_faster_gpu_once_fastest_first() -> None:
    faster = [g.name for g in HardwareInfo.from_labels("NVIDIA-L40S").higher_bandwidth_gpus()]
    assert faster[:2] == ["B200", "H200"]
    assert "H200-NVL" not in faster
    assert "L40S" not in faster
    assert HardwareInfo.from_labels("NVIDIA-B200").higher_bandwidth_gpus() == ()


def test_sxm_boards_imply_nvlink_and_pcie_cards_pcie_unless_told_otherwise() -> None:
    assert HardwareInfo.from_labels("NVIDIA-H100-80GB-HBM3").has_nvlink
    assert not HardwareInfo.from_labels("NVIDIA-L40S").has_nvlink
    told = HardwareInfo.from_labels("NVIDIA-H100-80GB-HBM3", interconnect="PCIe")
    assert told.effective_interconnect == "PCIe"


def test_the_spec_override_wins_over_node_labels() -> None:
    hw = HardwareInfo.from_labels(
        "NVIDIA-A100-SXM4-80GB",
        interconnect="NVLink",
        gpus_per_node=8,
        override_product="NVIDIA-L40S",
        override_interconnect="PCIe",
    )
    assert hw == HardwareInfo("L40S", "PCIe", 8)
    assert hw.describe() == "L40S (0.864 TB/s)"


def test_no_label_at_all_is_unknown_hardware() -> None:
    assert HardwareInfo.from_labels(None) == HardwareInfo()


def test_the_planner_reads_the_one_gpu_table_the_simulator_reads() -> None:
    assert set(KNOWN_GPUS) == set(GPUS)
    for name, facts in KNOWN_GPUS.items():
        spec = get_gpu(name)
        assert spec is GPUS[name]
        assert (facts.bandwidth_tbs, facts.interconnect) == (spec.hbm_tb_s, spec.link)
        assert facts.supports_fp8 is spec.supports_fp8, name
