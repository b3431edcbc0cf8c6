"""`kubectl describe lt` during a trial stays short, and shows every argument the trial changes.

The status is what the operator's own code writes: snapshots, ``changed_arguments`` and
``with_trial`` from the core, for a typical vLLM container (a model and a dozen flags) in its
fourth trial, whose change (chunked prefill) comes with a companion flag.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.integration.apiserver.test_kubectl import kubectl

from latency_tuner.api import build_crd
from latency_tuner.api.status import (
    Baseline,
    Condition,
    Diagnosis,
    Evidence,
    LatencyTargetStatus,
    MetricSnapshot,
    Phase,
    Trial,
    Verdict,
    with_trial,
)
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.rollout.values import changed_arguments, container_snapshot
from latency_tuner.sandbox.apiserver import ApiServer

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
pytestmark = pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")

NOW = "2026-12-02T20:30:00Z"
FLAGS = (
    "--tensor-parallel-size", "1", "--max-model-len", "8192", "--max-num-seqs", "64",
    "--gpu-memory-utilization", "0.9", "--port", "8000", "--served-model-name", "llama",
    "--no-enable-chunked-prefill", "--disable-log-requests",
)  # fmt: skip
MODEL = ("--model", "meta-llama/Llama-3.1-8B-Instruct")


def container(*extra: str, flags: tuple[str, ...] = FLAGS) -> ContainerConfig:
    return ContainerConfig(
        command=("vllm", "serve"),
        args=(*MODEL, *flags, *extra),
        image="vllm/vllm:v0.11",
        gpu_limit=1,
    )


def snapshot(ttft: float, itl: float) -> MetricSnapshot:
    # Quantiles as a window computes them: float noise included.
    return MetricSnapshot(
        ttft_seconds=ttft + 1e-9 / 3, itl_seconds=itl + 1e-9 / 7, request_rate=3.104282858044828,
        prompt_tokens_mean=6305.0847457627115, generation_tokens_mean=128.98305084745763,
        concurrency=6.6000000000000005, window="5m0s", requests=931, observed_at=NOW,
    )  # fmt: skip


def finished(number: int, before: ContainerConfig, after: ContainerConfig) -> Trial:
    return Trial(
        id=number, knob="maxNumSeqs", from_value="64", to_value=str(64 * 2**number),
        changes=changed_arguments(before, after), started_at=NOW, ready_at=NOW,
        finished_at=NOW, before=snapshot(0.9, 0.08), after=snapshot(0.8, 0.08),
        verdict=Verdict.REVERT, reason="score 0.80 -> 0.78 (-2%; needs better than -5%)",
        from_container=container_snapshot(before), to_container=container_snapshot(after),
        measurements=1,
    )  # fmt: skip


def mid_trial_status() -> LatencyTargetStatus:
    base = container()
    trials: list[Trial] = []
    for number in (1, 2, 3):
        tried = container(flags=tuple(f.replace("64", str(64 * 2**number)) for f in FLAGS))
        trials = with_trial(trials, finished(number, base, tried))
    chunked = container(
        "--max-num-batched-tokens", "2048",
        flags=(*(f for f in FLAGS if f != "--no-enable-chunked-prefill"),
               "--enable-chunked-prefill"),
    )  # fmt: skip
    conditions = [
        Condition(type=kind, status=state, reason=reason, message=message,
                  last_transition_time=NOW, observed_generation=1)
        for kind, state, reason, message in (
            ("Ready", "True", "Ready", "tuning Deployment llama"),
            ("MetricsAvailable", "True", "Measured", "931 requests in the last 5m0s"),
            ("Progressing", "True", "TrialStarted", "trial 4: chunkedPrefill false -> true"),
            ("TargetsMet", "False", "TargetsMissed", "score 0.78: ITL p99 134.909ms (target 75ms)"),
            ("Degraded", "False", "Healthy", "no failed rollout"),
        )
    ]  # fmt: skip
    return LatencyTargetStatus(
        phase=Phase.MEASURING, phase_since=NOW, observed_generation=1, conditions=conditions,
        observed=snapshot(0.9, 0.135),
        diagnosis=Diagnosis(
            bottleneck="PrefillInterference",
            findings=["ITL p99 is 6.0x p50 (135ms vs 22ms): decode steps stall"],
            evidence=[Evidence(signal="itl_p99", value=0.134908629441, unit="s",
                               text="ITL p99 134.909ms is above the target 75ms")],
            knobs=["chunkedPrefill", "maxNumBatchedTokens"],
        ),
        baseline=Baseline(
            container="vllm", command=list(base.command or ()), args=list(base.args or ()),
            image=base.image, gpu_limit="1", config_hash="1c0c7e5e0b58765b", captured_at=NOW,
        ),
        current_trial=Trial(
            id=4, knob="chunkedPrefill", from_value="false", to_value="true",
            changes=changed_arguments(base, chunked), started_at=NOW, ready_at=NOW,
            before=snapshot(0.9, 0.135), config_hash="ce471377a82e9b3a",
            previous_config_hash="1c0c7e5e0b58765b", from_container=container_snapshot(base),
            to_container=container_snapshot(chunked), measure_started_at=NOW, measurements=0,
            reason="PrefillInterference on ITL p99: enable chunked prefill",
        ),
        trials=trials, trial_count=4, expected_container=base.fingerprint(), stable_since=NOW,
    )  # fmt: skip


async def describe(api: ApiServer, tmp_path: Path, status: LatencyTargetStatus) -> str:
    await api.create(build_crd())
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    await api.create(
        {
            "apiVersion": "tuning.latencytuner.io/v1alpha1",
            "kind": "LatencyTarget",
            "metadata": {"name": "llama", "namespace": "ml"},
            "spec": {
                "targetRef": {"name": "llama", "container": "vllm"},
                "objectives": {"itl": {"percentile": 99, "threshold": "75ms"}},
            },
        }
    )
    document = json.loads(status.model_dump_json(by_alias=True, exclude_none=True))
    await api.patch(
        "tuning.latencytuner.io/v1alpha1", "LatencyTarget", "llama", {"status": document},
        namespace="ml", subresource="status",
    )  # fmt: skip
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    return await kubectl(kubeconfig, tmp_path / "cache", "describe", "lt", "llama", "-n", "ml")


async def test_a_finished_trial_adds_its_change_and_windows_to_describe_not_its_containers(
    api: ApiServer, tmp_path: Path
) -> None:
    text = await describe(api, tmp_path, mid_trial_status())
    # Only the running trial (before and after) and the baseline spell out the command line.
    assert text.count("meta-llama/Llama-3.1-8B-Instruct") == 3
    history = text.split("  Trials:", 1)[1].splitlines()
    assert len(history) <= 3 * 42, "\n".join(history)  # before, after, changes, verdict
    assert "Config Hash" not in "\n".join(history)
    assert "0000000" not in text  # no float noise
    assert "999999" not in text


async def test_describe_shows_both_arguments_a_trial_with_a_companion_flag_changes(
    api: ApiServer, tmp_path: Path
) -> None:
    text = await describe(api, tmp_path, mid_trial_status())
    assert "--enable-chunked-prefill: false -> true" in text
    assert "--max-num-batched-tokens: (absent) -> 2048" in text
    assert "--max-num-seqs: 64 -> 128" in text  # a finished trial still says what it changed
