"""GPU and model names resolve to specs and shapes."""

from __future__ import annotations

import pytest

from latency_tuner.perf.models import UnknownModelError, resolve_model
from latency_tuner.simulator.hardware import GPUS, UnknownGpuError, get_gpu


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("H100-SXM", "H100-SXM"),
        ("h100_sxm", "H100-SXM"),
        ("NVIDIA-H100-80GB-HBM3", "H100-SXM"),
        ("NVIDIA-H100-PCIe", "H100-PCIe"),
        ("a100_sxm", "A100-40G"),  # memory not stated: the smaller card, conservatively
        ("A100", "A100-40G"),
        ("NVIDIA-A100-SXM4-40GB", "A100-40G"),
        ("NVIDIA-H100-NVL", "H100-NVL"),
        ("NVIDIA-A100-SXM4-80GB", "A100-80G"),
        ("NVIDIA-A100-80GB-PCIe", "A100-80G-PCIe"),
        ("nvidia-h200", "H200"),
        ("NVIDIA-L40S", "L40S"),
        ("NVIDIA-L4", "L4"),
        ("NVIDIA-A10G", "A10G"),
    ],
)
def test_gpu_names_and_node_labels_resolve(name: str, canonical: str) -> None:
    assert get_gpu(name).name == canonical


def test_every_listed_gpu_is_found_by_its_own_name() -> None:
    assert set(GPUS) == {
        "B200", "H200", "H200-NVL", "H100-SXM", "H100-NVL", "H100-PCIe", "A100-80G", "A100-40G",
        "A100-80G-PCIe", "A100-40G-PCIe", "L40S", "L40", "L4", "A10G", "A10", "T4", "V100-SXM",
        "V100-PCIe",
    }  # fmt: skip
    for name, spec in GPUS.items():
        assert get_gpu(name.lower()) is spec


def test_an_unknown_gpu_names_the_known_ones() -> None:
    with pytest.raises(UnknownGpuError, match="known GPUs: B200, H200, H200-NVL, H100-SXM"):
        get_gpu("MI300X")


def test_only_blackwell_hopper_and_ada_have_fp8() -> None:
    assert {n for n, g in GPUS.items() if g.supports_fp8} == {
        "B200", "H200", "H200-NVL", "H100-SXM", "H100-NVL", "H100-PCIe", "L40S", "L40", "L4",
    }  # fmt: skip


def test_interconnects_match_the_form_factor() -> None:
    assert get_gpu("H100-SXM").link == "NVLink"
    assert get_gpu("A100-80G").link == "NVLink"
    assert get_gpu("L40S").link == "PCIe"
    assert get_gpu("H100-PCIe").link == "PCIe"


@pytest.mark.parametrize(
    ("name", "family", "weights"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B", "bf16"),
        ("meta-llama/Llama-3.1-8B", "Llama-3.1-8B", "bf16"),
        ("Llama-3.1-70B", "Llama-3.1-70B", "bf16"),
        ("meta-llama/Llama-3.3-70B-Instruct", "Llama-3.3-70B", "bf16"),
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B", "bf16"),
        ("Qwen/Qwen2.5-32B", "Qwen2.5-32B", "bf16"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "Mistral-7B-v0.3", "bf16"),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "Llama-3.1-8B", "fp8"),
        ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "Llama-3.3-70B", "fp8"),
        ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "Llama-3.1-70B", "int4"),
        ("Qwen/Qwen2.5-32B-Instruct-AWQ", "Qwen2.5-32B", "int4"),
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "Qwen2.5-7B", "int4"),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "Llama-3.1-8B", "int4"),
        ("/models/Llama-3.1-8B-Instruct-w4a16", "Llama-3.1-8B", "int4"),
    ],
)
def test_model_names_resolve_to_a_family_and_weight_format(
    name: str, family: str, weights: str
) -> None:
    shape = resolve_model(name)
    assert (shape.family, shape.weight_dtype, shape.name) == (family, weights, name)


def test_shapes_add_up_to_the_published_parameter_counts() -> None:
    for name in ("Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-7B", "Qwen2.5-32B", "Mistral-7B-v0.3"):
        m = resolve_model(name)
        params = m.layers * m.linear_params_per_layer + 2 * m.lm_head_params
        assert params / 1e9 == pytest.approx(m.params_b, rel=0.03), name


def test_an_unknown_model_lists_the_families() -> None:
    with pytest.raises(UnknownModelError, match="known families") as caught:
        resolve_model("deepseek-ai/DeepSeek-V3")
    assert "Llama-3.1-8B" in str(caught.value)
    assert "Mistral-7B-v0.3" in str(caught.value)
