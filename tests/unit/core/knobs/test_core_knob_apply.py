"""Applying one change to a vLLM command line is pure and touches only its flag(s)."""

from __future__ import annotations

import pytest
from tests.unit.core.builders import command_line

from latency_tuner.api.spec import QuantizationVariant
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs import (
    CATALOG,
    Change,
    KnobClass,
    KnobName,
    apply,
    format_number,
    same_value,
    variant_flags,
    written_value,
)
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def change(knob: KnobName, to: str | None, variant: QuantizationVariant | None = None) -> Change:
    return Change(
        knob=knob,
        from_value=None,
        to_value=to,
        knob_class=CATALOG[knob].knob_class,
        expected_gain=0.1,
        expected_score_gain=0.1,
        bottleneck=Bottleneck.QUEUEING,
        reason="test",
        variant=variant,
    )


def args_of(cl: VllmCommandLine) -> list[str]:
    command, args = cl.render()
    return [*(command or []), *(args or [])]


@pytest.mark.parametrize(
    ("knob", "to", "flags"),
    [
        (KnobName.MAX_NUM_BATCHED_TOKENS, "4096", ["--max-num-batched-tokens", "4096"]),
        (KnobName.MAX_NUM_SEQS, "512", ["--max-num-seqs", "512"]),
        (KnobName.GPU_MEMORY_UTILIZATION, "0.95", ["--gpu-memory-utilization", "0.95"]),
        (KnobName.KV_CACHE_DTYPE, "fp8", ["--kv-cache-dtype", "fp8"]),
        (KnobName.PREFIX_CACHING, "true", ["--enable-prefix-caching"]),
        (KnobName.CHUNKED_PREFILL, "true", ["--enable-chunked-prefill"]),
        (KnobName.CHUNKED_PREFILL, "false", ["--no-enable-chunked-prefill"]),
        (
            KnobName.SPECULATIVE_DECODING,
            '{"method":"ngram"}',
            ["--speculative-config", '{"method":"ngram"}'],
        ),
    ],
)
def test_each_knob_sets_its_flag(knob: KnobName, to: str, flags: list[str]) -> None:
    applied = apply(change(knob, to), command_line())
    assert args_of(applied.command_line) == ["vllm", "serve", MODEL, *flags]
    assert (applied.image, applied.gpu_limit) == (None, None)


def test_a_numeric_change_replaces_the_written_value_in_place() -> None:
    cl = command_line("--max-num-seqs=256", "--enforce-eager")
    applied = apply(change(KnobName.MAX_NUM_SEQS, "512"), cl)
    assert args_of(applied.command_line) == [
        "vllm",
        "serve",
        MODEL,
        "--max-num-seqs=512",
        "--enforce-eager",
    ]


def test_removals_take_the_flag_and_its_value_out() -> None:
    cl = command_line("--cpu-offload-gb", "8", "--enforce-eager", "--max-num-seqs", "64")
    cl = apply(change(KnobName.CPU_OFFLOAD, None), cl).command_line
    cl = apply(change(KnobName.ENFORCE_EAGER, None), cl).command_line
    assert args_of(cl) == ["vllm", "serve", MODEL, "--max-num-seqs", "64"]


def test_a_numeric_knob_set_to_none_removes_its_flag() -> None:
    cl = command_line("--max-num-seqs", "64")
    assert args_of(apply(change(KnobName.MAX_NUM_SEQS, None), cl).command_line) == [
        "vllm",
        "serve",
        MODEL,
    ]


def test_tensor_parallel_sets_the_size_and_the_gpu_limit_times_pipeline_stages() -> None:
    applied = apply(change(KnobName.TENSOR_PARALLEL, "2"), command_line())
    assert args_of(applied.command_line)[-2:] == ["--tensor-parallel-size", "2"]
    assert applied.gpu_limit == 2
    piped = apply(change(KnobName.TENSOR_PARALLEL, "4"), command_line("-pp", "2", "-tp", "2"))
    assert args_of(piped.command_line)[-4:] == ["-pp", "2", "-tp", "4"]
    assert piped.gpu_limit == 8


def test_a_tensor_parallel_size_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="not a number"):
        apply(change(KnobName.TENSOR_PARALLEL, "two"), command_line())


def test_a_quantization_variant_swaps_model_and_image_and_adds_its_args() -> None:
    variant = QuantizationVariant(
        name="awq",
        model="org/model-AWQ",
        image="vllm/vllm-openai:v0.11",
        args=[
            "--quantization",
            "awq_marlin",
            "--max-model-len=8192",
            "--dtype",
            "float16",
            "--revision=main",
        ],
    )
    applied = apply(change(KnobName.QUANTIZATION, "awq", variant), command_line())
    assert args_of(applied.command_line) == [
        "vllm",
        "serve",
        "org/model-AWQ",
        "--quantization",
        "awq_marlin",
        "--max-model-len",
        "8192",
        "--dtype",
        "float16",
        "--revision",
        "main",
    ]
    assert applied.image == "vllm/vllm-openai:v0.11"


def test_a_prequantized_model_drops_a_leftover_quantization_flag() -> None:
    variant = QuantizationVariant(name="fp8", model="org/model-FP8")
    cl = command_line("-q", "fp8", "--max-num-seqs", "64")
    applied = apply(change(KnobName.QUANTIZATION, "fp8", variant), cl)
    assert args_of(applied.command_line) == [
        "vllm",
        "serve",
        "org/model-FP8",
        "--max-num-seqs",
        "64",
    ]


def test_an_args_only_variant_keeps_the_model() -> None:
    variant = QuantizationVariant(name="online-fp8", args=["--quantization", "fp8"])
    applied = apply(change(KnobName.QUANTIZATION, "online-fp8", variant), command_line())
    assert args_of(applied.command_line) == ["vllm", "serve", MODEL, "--quantization", "fp8"]


def test_a_quantization_change_without_its_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="needs its variant"):
        apply(change(KnobName.QUANTIZATION, "awq"), command_line())


def test_variant_args_read_as_flag_value_pairs() -> None:
    assert variant_flags(["--quantization", "awq", "-tp=2", "--no-x", "--y", "--z", "1"]) == [
        ("quantization", "awq"),
        ("tp", "2"),
        ("no-x", ""),
        ("y", None),
        ("z", "1"),
    ]


def test_written_values_read_booleans_as_true_false_and_absent_as_none() -> None:
    cl = command_line("--no-enable-prefix-caching", "--max-num-seqs", "64", "--enforce-eager=maybe")
    assert written_value(KnobName.PREFIX_CACHING, cl) == "false"
    assert written_value(KnobName.CHUNKED_PREFILL, cl) is None
    assert written_value(KnobName.MAX_NUM_SEQS, cl) == "64"
    assert written_value(KnobName.ENFORCE_EAGER, cl) == "maybe"


def test_values_compare_as_numbers_when_they_are_numbers() -> None:
    assert same_value("0.90", "0.9")
    assert same_value("fp8", " fp8")
    assert not same_value("fp8", "fp8_e5m2")
    assert same_value(None, None)
    assert not same_value(None, "1")
    assert format_number(2048.0) == "2048"
    assert format_number(0.95) == "0.95"


def test_classes_order_safe_before_lossy_before_costly() -> None:
    assert [c.rank for c in (KnobClass.SAFE, KnobClass.LOSSY, KnobClass.COSTLY)] == [0, 1, 2]
    assert CATALOG[KnobName.KV_CACHE_DTYPE].knob_class is KnobClass.LOSSY
    assert CATALOG[KnobName.TENSOR_PARALLEL].knob_class is KnobClass.COSTLY


def test_a_change_describes_itself_from_effective_to_new_value() -> None:
    absent = change(KnobName.MAX_NUM_SEQS, "512")
    assert absent.describe() == "maxNumSeqs (default) -> 512"
    from_default = Change(**{**absent.__dict__, "from_effective": "256"})
    assert from_default.describe() == "maxNumSeqs 256 -> 512"
    removal = Change(
        **{
            **absent.__dict__,
            "knob": KnobName.ENFORCE_EAGER,
            "from_value": "true",
            "to_value": None,
        }
    )
    assert removal.describe() == "enforceEager true -> (removed)"
