"""The annotations of a change to a Deployment name the LatencyTarget, the action and every
argument changed, from what to what."""

from __future__ import annotations

import json

from latency_tuner.controller.attribution import (
    CHANGE_CAUSE,
    LAST_CHANGE,
    LATENCY_TARGET,
    Action,
    change_annotations,
    changed_arguments,
)
from latency_tuner.core.cluster import ContainerConfig

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def config(*args: str, image: str = "vllm/vllm-openai:v0.11.0", gpus: int = 1) -> ContainerConfig:
    return ContainerConfig(command=None, args=(MODEL, *args), image=image, gpu_limit=gpus)


def test_every_changed_flag_image_and_gpu_limit_is_named_from_what_to_what() -> None:
    before = config("--max-num-seqs", "16", "--enforce-eager")
    after = config(
        "--max-num-seqs", "32", "--tensor-parallel-size", "2", image="vllm/vllm-openai:v0.11.1",
        gpus=2,
    )  # fmt: skip
    assert changed_arguments(before, after) == [
        "--max-num-seqs: 16 -> 32",
        "--enforce-eager: (set) -> (absent)",
        "--tensor-parallel-size: (absent) -> 2",
        "image: vllm/vllm-openai:v0.11.0 -> vllm/vllm-openai:v0.11.1",
        "gpu limit: 1 -> 2",
    ]


def test_a_trial_names_its_target_number_and_knob() -> None:
    notes = change_annotations(
        namespace="ml",
        name="llama-latency",
        action=Action.TRIAL,
        before=config("--max-num-seqs", "16"),
        after=config("--max-num-seqs", "32"),
        trial=3,
        knob="maxNumSeqs",
    )
    assert notes[CHANGE_CAUSE] == (
        "latency-tuner, LatencyTarget ml/llama-latency: trial 3 (maxNumSeqs): "
        "--max-num-seqs: 16 -> 32"
    )
    assert notes[LATENCY_TARGET] == "ml/llama-latency"
    assert json.loads(notes[LAST_CHANGE]) == {
        "action": "trial",
        "trial": 3,
        "knob": "maxNumSeqs",
        "changes": ["--max-num-seqs: 16 -> 32"],
    }


def test_a_restore_needs_no_trial() -> None:
    notes = change_annotations(
        namespace="ml",
        name="llama-latency",
        action=Action.RESTORE,
        before=config("--enable-prefix-caching"),
        after=config(),
    )
    assert "restore of the original arguments" in notes[CHANGE_CAUSE]
    assert json.loads(notes[LAST_CHANGE]) == {
        "action": "restore",
        "changes": ["--enable-prefix-caching: (set) -> (absent)"],
    }
