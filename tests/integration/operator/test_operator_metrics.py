"""The running operator serves its own metrics per LatencyTarget: after a trial its patches,
trials, events and phase carry the target's namespace and name, and they are gone once the
LatencyTarget is deleted — kopf against the API emulator, scraped over HTTP."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from tests.integration.operator.harness import (
    LT_API,
    NAMESPACE,
    SEQS_ONLY,
    by_seqs,
    cluster,
    eventually,
    latency_target,
    operator_running,
    queueing,
)

from latency_tuner.sandbox.prometheus import free_port

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TARGET = {"namespace": NAMESPACE, "name": "llama-latency"}


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def of_target(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str) -> float:
    return sum(
        v
        for (n, labels), v in found.items()
        if n == name and TARGET.items() <= dict(labels).items()
    )


async def test_the_operators_series_name_the_target_and_go_when_it_is_deleted(
    tmp_path: Path,
) -> None:
    port = free_port()
    async with cluster(tmp_path, queueing(by_seqs), [MODEL, "--max-num-seqs", "16"]) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path, metrics_port=port):

            async def kept() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
                found = scrape(port)
                return found if of_target(found, "latency_tuner_trials_total") >= 1 else None

            during = await eventually(kept, within=30)
            await world.api.delete(LT_API, "LatencyTarget", "llama-latency", namespace=NAMESPACE)

            async def forgotten() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
                found = scrape(port)
                named = [k for k in found if TARGET.items() <= dict(k[1]).items()]
                return found if not named else None

            after = await eventually(forgotten, within=15)
    assert of_target(during, "latency_tuner_deployment_patches_total") >= 1
    assert of_target(during, "latency_tuner_events_total") >= 2  # TrialStarted, Kept
    assert of_target(during, "latency_tuner_reconcile_duration_seconds_count") >= 1
    assert of_target(during, "latency_tuner_target_phase") == 1.0  # one phase at a time
    assert not any(name.endswith("_created") for name, _ in during)
    assert any(name == "latency_tuner_build_info" for name, _ in after)
