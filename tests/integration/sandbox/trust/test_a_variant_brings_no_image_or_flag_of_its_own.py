"""A LatencyTarget may switch vLLM to a quantized variant, never to an image or a flag of the
tenant's choosing: the image must stay in the running repository (registry included) or match
the operator's allow-list, and a variant's args are refused before anything runs.
Finding 1 of issue 13 and variations on it — kopf running against the API emulator, a
Deployment whose decode is memory-bound, so the planner's first change is the variant."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tests.integration.operator.harness import (
    World,
    cluster,
    condition,
    eventually,
    latency_target,
    operator_running,
)
from tests.integration.sandbox.trust.support import ARGS, IMAGE, several_more_rounds

from latency_tuner.vllm.args import VllmCommandLine

AWQ_MODEL = "org/Llama-3.1-8B-Instruct-AWQ"


def slow_decode(_: VllmCommandLine) -> dict[str, Any]:
    """ITL p90 65 ms with two requests running: decode is memory-bandwidth bound."""
    return {
        "itl": {50: 0.060, 90: 0.065, 95: 0.07, 99: 0.075},
        "itl_mean": 0.061,
        "running_mean": 2.0,
        "running_max": 4.0,
        "request_rate": 0.2,
    }


def variant_target(image: str, **variant: Any) -> dict[str, Any]:
    knobs = {
        "prefixCaching": False,
        "chunkedPrefill": False,
        "maxNumBatchedTokens": None,
        "gpuMemoryUtilization": None,
        "maxNumSeqs": None,
        "quantization": {"variants": [{"name": "awq", "image": image, "model": AWQ_MODEL,
                                       **variant}]},
    }  # fmt: skip
    target = latency_target(knobs=knobs)
    target["spec"]["objectives"] = {"itl": {"percentile": 90, "threshold": "40ms"}}
    return target


async def image_now(world: World) -> str:
    dep = await world.deployment()
    return str(dep["spec"]["template"]["spec"]["containers"][0]["image"])


async def refused(world: World) -> dict[str, Any] | None:
    found = condition(await world.status(), "Degraded")
    return found if found and found["reason"] == "ChangeRefused" else None


HOSTILE_IMAGES = [
    "attacker.example/miner:latest",
    # The same repository path on another registry host is another image.
    "evil.example/vllm/vllm-openai:v0.11.0",
    "localhost:5000/vllm/vllm-openai:v0.11.0",
    # A digest does not make a foreign repository the running one.
    "attacker.example/miner@sha256:" + "0" * 64,
    # The running repository's name as a prefix of a longer one.
    "vllm/vllm-openai-miner:v0.11.0",
    # The running repository's name as a registry host label.
    "vllm/vllm-openai.attacker.example/x:1",
]


@pytest.mark.parametrize("image", HOSTILE_IMAGES)
async def test_a_variant_image_outside_the_running_repository_is_refused_and_never_runs(
    tmp_path: Path, image: str
) -> None:
    async with cluster(tmp_path, slow_decode, ARGS) as world:
        await world.api.create(variant_target(image))
        async with operator_running(world, tmp_path):
            degraded = await eventually(lambda: refused(world))
            await several_more_rounds()
            running = await image_now(world)
            patches = world.deployment_patches()
    assert image in degraded["message"]
    assert running == IMAGE
    assert patches == []


async def test_a_variant_in_the_running_repository_is_applied_so_the_refusals_mean_something(
    tmp_path: Path,
) -> None:
    awq_image = "docker.io/vllm/vllm-openai:v0.11.0-awq"
    async with cluster(tmp_path, slow_decode, ARGS) as world:
        await world.api.create(variant_target(awq_image))
        async with operator_running(world, tmp_path):

            async def switched() -> bool:
                return await image_now(world) == awq_image

            await eventually(switched)
            args = await world.args()
    assert args[0] == AWQ_MODEL


async def test_an_image_the_operator_allows_by_prefix_is_applied(tmp_path: Path) -> None:
    allowed = "registry.example/ml/llama-awq:1"
    async with cluster(tmp_path, slow_decode, ARGS) as world:
        await world.api.create(variant_target(allowed))
        async with operator_running(world, tmp_path, variant_images=("registry.example/ml/",)):

            async def switched() -> bool:
                return await image_now(world) == allowed

            await eventually(switched)


async def test_an_allowed_prefix_does_not_admit_a_longer_name(tmp_path: Path) -> None:
    longer = "registry.example/ml-miner/x:1"
    async with cluster(tmp_path, slow_decode, ARGS) as world:
        await world.api.create(variant_target(longer))
        async with operator_running(world, tmp_path, variant_images=("registry.example/ml/",)):
            degraded = await eventually(lambda: refused(world))
            await several_more_rounds()
            running = await image_now(world)
    assert longer in degraded["message"]
    assert running == IMAGE


@pytest.mark.parametrize(
    "args",
    [
        ["--trust-remote-code"],
        ["--api-key", "stolen"],
        ["--quantization", "awq", "--served-model-name", "gpt-4"],
        ["--quantization=awq", "--trust-remote-code=true"],
        ["--chat-template", "/etc/shadow"],
    ],
)
async def test_a_variant_with_arguments_beyond_the_checkpoints_is_refused_when_written(
    tmp_path: Path, args: list[str]
) -> None:
    async with cluster(tmp_path, slow_decode, ARGS) as world:
        with pytest.raises(Exception) as caught:  # noqa: PT011  (the emulator's 422, below)
            await world.api.create(variant_target(IMAGE, args=args))
        await asyncio.sleep(0)
        stored = await world.api.list_objects(
            "tuning.latencytuner.io/v1alpha1", "LatencyTarget", namespace="ml"
        )
    assert "variants" in str(caught.value)
    assert stored == []
