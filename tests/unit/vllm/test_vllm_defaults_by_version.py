"""vLLM's defaults by release, and the reason each effective value comes with."""

import pytest

from latency_tuner.vllm.args import VllmCommandLine
from latency_tuner.vllm.defaults import (
    LATEST_KNOWN,
    Hardware,
    VllmVersion,
    default_value,
    effective_value,
    explain,
    explain_config,
    version_from_image,
)

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
B200 = Hardware(gpu_product="NVIDIA-B200")
H100 = Hardware(gpu_product="NVIDIA-H100-80GB-HBM3")
L4 = Hardware(gpu_product="NVIDIA-L4")
V = VllmVersion.parse


def line(*args: str) -> VllmCommandLine:
    return VllmCommandLine.parse(None, [MODEL, *args])


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("0.28.0", VllmVersion(0, 28, 0)),
        ("v0.11.1rc2", VllmVersion(0, 11, 1)),
        ("0.32.0+cpu", VllmVersion(0, 32, 0)),
        ("0.9", VllmVersion(0, 9, 0)),
        ("latest", None),
        ("nightly-2026", None),
    ],
)
def test_versions_read_from_release_names(text: str, version: VllmVersion | None) -> None:
    assert VllmVersion.parse(text) == version


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("vllm/vllm-openai:v0.28.1", VllmVersion(0, 28, 1)),
        ("registry.local:5000/vllm/vllm-openai:0.14.0", VllmVersion(0, 14, 0)),
        ("vllm/vllm-openai:latest", None),
        ("vllm/vllm-openai", None),
        ("vllm/vllm-openai@sha256:abc", None),
        (None, None),
    ],
)
def test_the_image_tag_names_the_release(image: str | None, version: VllmVersion | None) -> None:
    assert version_from_image(image) == version


@pytest.mark.parametrize(
    ("hardware", "version", "tokens"),
    [
        (B200, V("0.27.1"), 8192),
        (B200, V("0.28.0"), 16384),
        (B200, None, 16384),
        (H100, V("0.28.0"), 8192),
        (L4, V("0.28.0"), 2048),
        (Hardware(gpu_product="AMD-Instinct-MI300X"), V("0.30.0"), 16384),
    ],
)
def test_the_batch_token_default_of_vllm_serve_follows_the_release_and_the_gpu(
    hardware: Hardware, version: VllmVersion | None, tokens: int
) -> None:
    assert default_value("max-num-batched-tokens", hardware=hardware, version=version) == tokens


def test_the_reason_names_the_release_and_the_change_that_set_the_default() -> None:
    resolved = explain(line(), "max-num-batched-tokens", hardware=B200, version=V("0.28.0"))
    assert (resolved.value, resolved.written) == (16384, False)
    assert "0.28.0" in resolved.reason
    assert "vllm#51726" in resolved.reason
    older = explain(line(), "max-num-batched-tokens", hardware=B200, version=V("0.27.0"))
    assert older.value == 8192
    assert "before 0.28.0" in older.reason


def test_a_written_value_wins_and_says_so() -> None:
    resolved = explain(line("--max-num-batched-tokens=4k"), "max_num_batched_tokens", hardware=B200)
    assert (resolved.value, resolved.written, resolved.reason) == (
        4000, True, "written on the command line")  # fmt: skip


def test_an_unknown_version_is_taken_as_the_newest_known_and_the_reason_says_so() -> None:
    resolved = explain(line(), "async-scheduling")
    assert resolved.value is True
    assert f"taken as {LATEST_KNOWN}" in resolved.reason


def test_throughput_performance_mode_doubles_both_batch_limits_when_not_written() -> None:
    cl = line("--performance-mode", "throughput")
    config = explain_config(cl, hardware=H100, version=V("0.20.0"))
    assert config["max-num-batched-tokens"].value == 16384
    assert config["max-num-seqs"].value == 2048
    assert "doubled by --performance-mode throughput" in config["max-num-seqs"].reason
    written = explain_config(line("--performance-mode=throughput", "--max-num-seqs", "64"),
                             hardware=H100, version=V("0.20.0"))  # fmt: skip
    assert written["max-num-seqs"].value == 64


def test_performance_mode_does_not_exist_before_its_release() -> None:
    old = explain_config(line(), hardware=H100, version=V("0.15.0"))
    assert old["performance-mode"].value is None
    assert old["max-num-batched-tokens"].value == 8192
    assert explain(line(), "performance-mode", version=V("0.16.0")).value == "balanced"


@pytest.mark.parametrize(("version", "on"), [(V("0.13.0"), False), (V("0.14.0"), True)])
def test_async_scheduling_is_on_by_default_from_0_14(version: VllmVersion, on: bool) -> None:
    assert effective_value(line(), "async-scheduling", version=version) is on


def test_async_scheduling_is_off_with_a_draft_method_other_than_eagle_or_mtp() -> None:
    ngram = line("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}')
    resolved = explain(ngram, "async-scheduling", version=V("0.20.0"))
    assert resolved.value is False
    assert "'ngram'" in resolved.reason
    eagle = line("--speculative-config", '{"method": "eagle3", "model": "x"}')
    assert effective_value(eagle, "async-scheduling", version=V("0.20.0")) is True
    written = line("--no-async-scheduling")
    assert effective_value(written, "async-scheduling", version=V("0.20.0")) is False


@pytest.mark.parametrize("o0", [["-O0"], ["-O", "0"], ["-O=0"], ["--optimization-level", "0"]])
def test_o0_is_explained_as_eager_execution_the_enforce_eager_knob_cannot_undo(
    o0: list[str],
) -> None:
    resolved = explain(line(*o0), "enforce-eager", version=V("0.20.0"))
    assert resolved.value is False  # the flag is not written: removing it changes nothing
    assert "-O0 is written" in resolved.reason
    assert "removing --enforce-eager would not change that" in resolved.reason
    assert effective_value(line(*o0), "optimization-level", version=V("0.20.0")) == 0


def test_optimisation_levels_default_to_o2_and_do_not_exist_before_0_11_1() -> None:
    assert effective_value(line(), "optimization-level", version=V("0.12.0")) == 2
    assert effective_value(line(), "optimization-level", version=V("0.11.0")) is None
    assert effective_value(line(), "enforce-eager", version=V("0.20.0")) is False
    assert effective_value(line("-O3"), "enforce-eager", version=V("0.20.0")) is False


def test_every_explanation_describes_itself_in_one_line() -> None:
    config = explain_config(line("--no-enable-prefix-caching"), hardware=L4, version=V("0.28.0"))
    described = {flag: r.describe() for flag, r in config.items()}
    assert described["enable-prefix-caching"] == (
        "enable-prefix-caching=false (written on the command line)")  # fmt: skip
    assert described["max-num-batched-tokens"].startswith("max-num-batched-tokens=2048 (2048 ")
    assert described["max-model-len"].startswith("max-model-len=unknown")
