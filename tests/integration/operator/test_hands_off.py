"""When the operator must not change a Deployment, it does not: Recommend publishes the patch,
Off only diagnoses, a Deployment another controller owns gets recommendations, a second
LatencyTarget for the same Deployment stands aside, an invalid spec says why — kopf running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.operator.harness import (
    DEPLOYMENT,
    by_seqs,
    cluster,
    condition,
    eventually,
    latency_target,
    operator_running,
    posted,
    queueing,
)

from latency_tuner.core.rollout import Reason
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [MODEL, "--max-num-seqs", "16"]
KSERVE_OWNER = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "name": "llama-isvc",
    "uid": "6c1f7c3e-0000-4000-8000-000000000001",
    "controller": True,
    "blockOwnerDeletion": True,
}


async def test_recommend_off_and_controller_owned_deployments_are_left_untouched(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.add_deployment(ARGS, "llama-off")
        await world.add_deployment(ARGS, "llama-isvc", ownerReferences=[KSERVE_OWNER])
        before = {n: await world.deployment(n) for n in (DEPLOYMENT, "llama-off", "llama-isvc")}
        await world.api.create(latency_target("recommend", mode="Recommend"))
        await world.api.create(latency_target("off", target="llama-off", mode="Off"))
        await world.api.create(latency_target("isvc", target="llama-isvc"))
        async with operator_running(world, tmp_path):

            async def settled() -> dict[str, dict[str, Any]] | None:
                found = {n: await world.status(n) for n in ("recommend", "off", "isvc")}
                ok = (
                    found["recommend"].get("recommendation")
                    and found["isvc"].get("recommendation")
                    and (found["off"].get("diagnosis") or {}).get("bottleneck") == "Queueing"
                )
                return found if ok else None

            statuses = await eventually(settled, within=30)
            after = {n: await world.deployment(n) for n in before}
            recommendation_events = await posted(world, Reason.RECOMMENDATION, about="recommend")
    for name, dep in after.items():
        assert dep["metadata"]["generation"] == before[name]["metadata"]["generation"], name
        assert dep["spec"] == before[name]["spec"], name
        assert world.deployment_patches(name) == [], name

    rec = statuses["recommend"]
    assert rec["phase"] == "Observing"
    assert "currentTrial" not in rec
    assert "baseline" not in rec
    assert (rec["recommendation"]["knob"], rec["recommendation"]["to"]) == ("maxNumSeqs", "32")
    patch = rec["recommendation"]["patch"]
    assert {
        "op": "add",
        "path": "/spec/template/spec/containers/0/args",
        "value": [MODEL, "--max-num-seqs", "32"],
    } in patch
    progressing = condition(rec, "Progressing")
    assert progressing is not None
    assert progressing["reason"] == "ModeRecommend"
    assert len([e for e in recommendation_events if "recommend" in str(e["involvedObject"])]) >= 1

    off = statuses["off"]
    assert "recommendation" not in off
    assert "currentTrial" not in off
    assert off["diagnosis"]["knobs"]  # what could help is still said
    off_progress = condition(off, "Progressing")
    assert off_progress is not None
    assert off_progress["reason"] == "ModeOff"

    isvc = statuses["isvc"]
    assert "currentTrial" not in isvc
    assert isvc["recommendation"]["to"] == "32"
    ready, managed = condition(isvc, "Ready"), condition(isvc, "Progressing")
    assert ready is not None
    assert managed is not None
    assert ready["status"] == "True"
    assert "InferenceService/llama-isvc" in ready["message"]
    assert managed["reason"] == "ManagedByController"
    # What the recommendation would do is what a trial would have done.
    assert VllmCommandLine.parse(None, patch[0]["value"]).get("max-num-seqs") == "32"


async def test_a_conflicting_or_invalid_latency_target_says_why_and_does_nothing(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.add_deployment(ARGS, "llama-other")
        owner = latency_target("first", target="llama-other", mode="Recommend")
        await world.api.create(owner)
        await world.api.create(latency_target("second", target="llama-other"))
        # Valid for the CRD's schema, refused by the models: the regex does not compile.
        bad = latency_target(
            "bad-regex", metrics={"matchers": [{"label": "pod", "op": "=~", "value": "(llama"}]}
        )
        await world.api.create(bad)
        async with operator_running(world, tmp_path):

            async def failed(name: str) -> dict[str, Any] | None:
                status = await world.status(name)
                ready = condition(status, "Ready")
                return status if ready and ready["status"] == "False" else None

            second = await eventually(lambda: failed("second"), within=20)
            invalid = await eventually(lambda: failed("bad-regex"), within=20)
            first = await eventually(lambda: _with_recommendation(world, "first"), within=30)
            writes_before = _status_writes(world, "bad-regex")
            second_before = await world.status("second")
            ticks = world.observe_calls  # the first target's rounds: the timers keep firing
            await eventually(lambda: _more(world, ticks, 6), within=10)
            writes_after = _status_writes(world, "bad-regex")
            second_after = await world.status("second")
            await posted(world, Reason.INVALID_SPEC)
            await posted(world, Reason.CONFLICT)
            invalid_events = await world.events(Reason.INVALID_SPEC)
            conflict_events = await world.events(Reason.CONFLICT)
    ready = condition(second, "Ready")
    assert ready is not None
    assert ready["reason"] == "Conflict"
    assert "first" in ready["message"]
    assert second["phase"] == "Failed"
    assert "recommendation" not in second
    assert "baseline" not in second
    assert world.deployment_patches("llama-other") == []
    assert first["phase"] == "Observing"
    assert second_after == second_before  # standing aside is quiet: no rewrites
    assert [e["involvedObject"]["name"] for e in conflict_events] == ["second"]

    bad_ready = condition(invalid, "Ready")
    assert bad_ready is not None
    assert bad_ready["reason"] == "InvalidSpec"
    assert "spec.metrics.matchers[0]" in bad_ready["message"]
    assert "not a regular expression" in bad_ready["message"]
    assert invalid["phase"] == "Failed"
    assert writes_after == writes_before  # written once; no crash loop, no rewrite per tick
    assert len(invalid_events) == 1
    assert world.deployment_patches(DEPLOYMENT) == []


async def _with_recommendation(world: Any, name: str) -> dict[str, Any] | None:
    status: dict[str, Any] = await world.status(name)
    return status if status.get("recommendation") else None


def _status_writes(world: Any, name: str) -> int:
    path = f"/apis/tuning.latencytuner.io/v1alpha1/namespaces/ml/latencytargets/{name}/status"
    return sum(
        1
        for r in list(world.api.emulator)
        if getattr(r.method, "value", r.method) == "PATCH" and r.url.path == path
    )


async def _more(world: Any, start: int, n: int) -> bool:
    return bool(world.observe_calls - start >= n)
