"""The Deployment controller's arithmetic and the container-to-simulator translation."""

from __future__ import annotations

import pytest

from latency_tuner.sandbox.podrunner import (
    Counts,
    compute_status,
    resolve_strategy,
    sim_argv,
    template_hash,
)

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": 1}, ("RollingUpdate", 1, 0)),  # 25% of 1: surge rounds up, unavailable down
        ({"replicas": 4}, ("RollingUpdate", 1, 1)),
        ({"replicas": 10}, ("RollingUpdate", 3, 2)),
        (
            {"replicas": 2, "strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}},
            ("RollingUpdate", 0, 1),
        ),
        ({"replicas": 3, "strategy": {"type": "Recreate"}}, ("Recreate", 0, 0)),
    ],
)
def test_the_rolling_update_bounds_follow_the_api_defaults_and_rounding(
    spec: dict[str, object], expected: tuple[str, int, int]
) -> None:
    assert resolve_strategy(spec) == expected


def test_the_template_hash_is_stable_and_changes_with_the_template() -> None:
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "a"}]}}
    same = {"spec": {"containers": [{"name": "a"}]}, "metadata": {"labels": {"app": "x"}}}
    other = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "b"}]}}

    assert template_hash(template) == template_hash(same)
    assert template_hash(template) != template_hash(other)
    assert len(template_hash(template)) == 10


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (None, [MODEL, "--max-num-seqs", "4", "--port", "8000"]),
        (["vllm", "serve"], [MODEL, "--max-num-seqs=4", "--host", "0.0.0.0"]),
        (
            ["python3", "-m", "vllm.entrypoints.openai.api_server"],
            ["--model", MODEL, "--max-num-seqs", "4"],
        ),
        (["/bin/sh", "-c"], [f"exec vllm serve {MODEL} --max-num-seqs 4 --port 8000"]),
    ],
)
def test_every_container_form_becomes_the_same_simulator_command_on_our_port(
    command: list[str] | None, args: list[str]
) -> None:
    container = {"name": "vllm", "command": command, "args": args}

    argv = sim_argv(container, port=4321, gpu="H100-SXM", gpus=2)

    assert argv == [
        "serve", MODEL, "--max-num-seqs=4",
        "--host", "127.0.0.1", "--port", "4321", "--sim-gpu", "H100-SXM", "--sim-gpus", "2",
    ]  # fmt: skip


def test_kubernetes_variable_references_in_args_are_expanded_from_the_env() -> None:
    container = {
        "args": ["$(MODEL)", "--no-enable-prefix-caching"],
        "env": [{"name": "MODEL", "value": MODEL}],
    }

    argv = sim_argv(container, port=1, gpu="L40S", gpus=1)

    assert argv[:3] == ["serve", MODEL, "--no-enable-prefix-caching"]


def _deployment(status: dict[str, object], deadline: int = 30) -> dict[str, object]:
    return {
        "metadata": {"name": "d", "generation": 2},
        "spec": {"replicas": 1, "progressDeadlineSeconds": deadline},
        "status": status,
    }


def test_a_rollout_without_progress_times_out_after_its_deadline() -> None:
    created = compute_status(
        _deployment(
            {"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}
        ),
        Counts(replicas=2, updated=1, ready=1, available=1),
        rs_name="d-new",
        new_rs_created=True,
        now=1_000_000.0,
    )
    [progressing] = [c for c in created["conditions"] if c["type"] == "Progressing"]
    assert progressing["reason"] == "NewReplicaSetCreated"

    stuck = Counts(replicas=2, updated=1, ready=1, available=1)
    before = compute_status(
        _deployment(created), stuck, rs_name="d-new", new_rs_created=False, now=1_000_029.0
    )
    after = compute_status(
        _deployment(created), stuck, rs_name="d-new", new_rs_created=False, now=1_000_031.0
    )

    reasons = [
        {c["type"]: (c["status"], c["reason"]) for c in s["conditions"]} for s in (before, after)
    ]
    assert reasons[0]["Progressing"] == ("True", "NewReplicaSetCreated")
    assert reasons[1]["Progressing"] == ("False", "ProgressDeadlineExceeded")
    assert reasons[1]["Available"] == ("True", "MinimumReplicasAvailable")
    assert after["observedGeneration"] == 2
    assert after["unavailableReplicas"] == 1


def test_progress_moves_the_deadline_and_completion_says_new_replicaset_available() -> None:
    created = compute_status(
        _deployment({}), Counts(2, 1, 1, 1), rs_name="d-new", new_rs_created=True, now=1e6
    )
    ready = compute_status(
        _deployment(created),
        Counts(2, 1, 2, 2),
        rs_name="d-new",
        new_rs_created=False,
        now=1e6 + 20,
    )
    done = compute_status(
        _deployment(ready), Counts(1, 1, 1, 1), rs_name="d-new", new_rs_created=False, now=1e6 + 21
    )

    [moved] = [c for c in ready["conditions"] if c["type"] == "Progressing"]
    assert moved["reason"] == "ReplicaSetUpdated"
    assert moved["lastUpdateTime"] != moved["lastTransitionTime"]
    [finished] = [c for c in done["conditions"] if c["type"] == "Progressing"]
    assert (finished["status"], finished["reason"]) == ("True", "NewReplicaSetAvailable")
