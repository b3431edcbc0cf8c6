"""Helpers of the real-engine tier: turn a planned change into the arguments of the next real
vLLM server, as the operator renders it onto the Deployment."""

from __future__ import annotations

from latency_tuner.core.knobs import Change, apply
from latency_tuner.vllm.args import VllmCommandLine

MODEL_PATH = "/models/tiny"  # the Deployment's model path; the server gets the real folder


def deployment_line(args: list[str]) -> VllmCommandLine:
    """The Deployment's container as the operator reads it: ``vllm serve MODEL ARGS``."""
    return VllmCommandLine.parse(["vllm", "serve"], [MODEL_PATH, *args])


def args_after(change: Change, args: list[str]) -> list[str]:
    """The server arguments once the operator's change is applied (model left out)."""
    _, rendered = apply(change, deployment_line(args)).command_line.render()
    assert rendered is not None
    assert rendered[0] == MODEL_PATH
    return rendered[1:]
