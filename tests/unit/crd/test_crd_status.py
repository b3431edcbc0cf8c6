"""The status the operator writes is one the API server stores."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from latency_tuner.api import (
    Baseline,
    ConditionType,
    Diagnosis,
    Evidence,
    IncompatibleValue,
    JsonPatchOperation,
    LatencyTarget,
    LatencyTargetStatus,
    MetricSnapshot,
    Phase,
    Recommendation,
    Trial,
    Verdict,
    set_condition,
)

NOW = "2026-12-02T09:00:00Z"
ARGS = "/spec/template/spec/containers/0/args"


def full_status() -> LatencyTargetStatus:
    snapshot = MetricSnapshot(
        ttft_seconds=0.81,
        itl_seconds=0.031,
        e2e_seconds=7.5,
        request_rate=4.2,
        prompt_tokens_mean=1800,
        generation_tokens_mean=240,
        concurrency=11.5,
        window="5m",
        requests=1260,
        observed_at=NOW,
    )
    conditions = set_condition(
        [],
        ConditionType.TARGETS_MET,
        False,
        "TtftAboveTarget",
        "ttft p95 810ms > 500ms",
        datetime(2026, 12, 2, 9, tzinfo=UTC),
        3,
    )
    return LatencyTargetStatus(
        phase=Phase.SETTLING,
        phase_since=NOW,
        observed_generation=3,
        conditions=conditions,
        observed=snapshot,
        diagnosis=Diagnosis(
            bottleneck="Prefill",
            findings=["long prompts dominate TTFT"],
            evidence=[Evidence(signal="prefill_time_p95", value=0.6, unit="s", text="0.6s")],
            knobs=["maxNumBatchedTokens"],
            advice=["trim prompts"],
        ),
        baseline=Baseline(image="vllm/vllm-openai:v0.9.2", config_hash="h0", captured_at=NOW),
        current_trial=Trial(
            id=2,
            knob="maxNumBatchedTokens",
            from_value="2048",
            to_value="8192",
            started_at=NOW,
            ready_at=NOW,
            before=snapshot,
            config_hash="h2",
            previous_config_hash="h1",
        ),
        trials=[
            Trial(
                id=1,
                knob="prefixCaching",
                from_value=None,
                to_value="true",
                started_at=NOW,
                finished_at=NOW,
                before=snapshot,
                after=snapshot,
                verdict=Verdict.REVERT,
                reason="no gain",
            )
        ],
        trial_count=2,
        recommendation=Recommendation(
            knob="maxNumSeqs",
            to_value="128",
            patch=[
                JsonPatchOperation(op="test", path=ARGS, value=[]),
                JsonPatchOperation(op="add", path=f"{ARGS}/-", value="x"),
                JsonPatchOperation(op="remove", path="/spec/replicas"),
            ],
            reason="queueing",
        ),
        incompatible=[IncompatibleValue(knob="kvCacheDtype", value="fp8", reason="crashed")],
    )


def test_a_full_status_passes_the_crd_schema(judge: Any) -> None:
    target = LatencyTarget.from_manifest(
        {
            "apiVersion": "tuning.latencytuner.io/v1alpha1",
            "kind": "LatencyTarget",
            "metadata": {"name": "t", "namespace": "llm", "generation": 3},
            "spec": {
                "targetRef": {"name": "llama"},
                "objectives": {"ttft": {"percentile": 95, "threshold": "500ms"}},
            },
        }
    ).model_copy(update={"status": full_status()})
    manifest = target.to_manifest()
    assert manifest["status"]["observed"]["ttft"] == "810ms"
    assert judge.schema_errors(manifest, with_api_server_rules=True) == []
    assert LatencyTarget.from_manifest(manifest) == target


def test_an_empty_status_passes_the_crd_schema_too(judge: Any) -> None:
    manifest = {
        "apiVersion": "tuning.latencytuner.io/v1alpha1",
        "kind": "LatencyTarget",
        "metadata": {"name": "t"},
        "spec": {
            "targetRef": {"name": "llama"},
            "objectives": {"itl": {"percentile": 99, "threshold": "40ms"}},
        },
        "status": LatencyTargetStatus().model_dump(mode="json", exclude_none=True),
    }
    assert judge.schema_errors(manifest, with_api_server_rules=True) == []
