"""The Deployment controller's arithmetic and the container-to-simulator translation."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from latency_tuner.sandbox.podrunner import (
    Counts,
    SimulatorEngine,
    compute_status,
    plan_scale,
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


@dataclass(eq=False)
class _Pod:
    template_hash: str
    created: float
    ready_since: float | None = None
    terminating: bool = False
    node: str | None = "node"

    @property
    def ready(self) -> bool:
        return self.ready_since is not None

    def available(self, min_ready_seconds: float, now: float) -> bool:
        return self.ready_since is not None and now - self.ready_since >= min_ready_seconds


def test_a_rolling_update_of_one_replica_surges_one_pod_and_stops_the_old_one_once_it_serves() -> (
    None
):
    old = _Pod("old", created=0, ready_since=0)
    spec = {"replicas": 1}

    first = plan_scale(spec, [old], "new", now=10)
    new = _Pod("new", created=10)
    while_starting = plan_scale(spec, [old, new], "new", now=11)
    new.ready_since = 12
    once_ready = plan_scale(spec, [old, new], "new", now=13)

    assert (first.create, first.stop) == (1, [])
    assert (while_starting.create, while_starting.stop) == (0, [])
    assert (once_ready.create, once_ready.stop) == (0, [old])


def test_a_rolling_update_stops_old_pods_that_serve_nothing_before_available_ones() -> None:
    broken = _Pod("old", created=1)
    serving = [_Pod("old", created=0, ready_since=0), _Pod("old", created=2, ready_since=0)]
    spec = {"replicas": 3, "strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}

    plan = plan_scale(spec, [*serving, broken], "new", now=10)

    assert (plan.create, plan.stop) == (0, [broken])


def test_recreate_stops_every_old_pod_and_creates_new_ones_only_when_they_are_gone() -> None:
    old = [_Pod("old", created=0, ready_since=0), _Pod("old", created=1, ready_since=0)]
    spec = {"replicas": 2, "strategy": {"type": "Recreate"}}

    first = plan_scale(spec, old, "new", now=5)
    for pod in old:
        pod.terminating = True
    while_stopping = plan_scale(spec, old, "new", now=6)
    gone: list[_Pod] = []
    after = plan_scale(spec, gone, "new", now=7)

    assert (first.create, first.stop) == (0, old)
    assert (while_stopping.create, while_stopping.stop) == (0, [])
    assert (after.create, after.stop) == (2, [])


def test_scaling_down_stops_the_unready_and_newest_pods_first() -> None:
    oldest = _Pod("h", created=0, ready_since=0)
    newer = _Pod("h", created=5, ready_since=6)
    unready = _Pod("h", created=1)

    plan = plan_scale({"replicas": 1}, [oldest, newer, unready], "h", now=10)

    assert (plan.create, plan.stop) == (0, [unready, newer])


def test_the_simulator_engine_runs_latency_tuner_sim_with_the_seed_after_the_containers_flags() -> (
    None
):
    container = {"args": [MODEL, "--max-num-seqs", "8"]}

    command = SimulatorEngine(python="/py", seed=7, options=("--sim-x",)).command(
        container, port=9000, gpu="L4", gpus=1
    )

    assert command.program == ("/py", "-m", "latency_tuner.cli", "sim")
    assert command.args[:2] == ("serve", MODEL)
    assert command.args[-3:] == ("--sim-seed", "7", "--sim-x")
    assert "--max-num-seqs=8" in command.args
