"""A canary in the N-replica world: one extra pod with the trial's arguments takes one pod's
share of the traffic while the main Deployment runs one replica fewer, its series are the ones
the production canary arms select, and a rejected canary never touches the main Deployment."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.unit.benchmarks.support import EASY, short_chats

from latency_tuner.api.spec import Strategy
from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.convergence.measure import MATCHERS
from latency_tuner.convergence.operator_run import run_operator
from latency_tuner.convergence.replicated import ReplicatedDeployment, VirtualCanaries
from latency_tuner.convergence.scenario import parse_scenario
from latency_tuner.convergence.space import start_container
from latency_tuner.convergence.virtual import TARGET
from latency_tuner.convergence.world import make_world
from latency_tuner.core.canary import Owner, arms, canary_name
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.observation import Observation

OWNER = Owner("tuning.latencytuner.io/v1alpha1", "LatencyTarget", TARGET, "uid-1")


def _saturated() -> dict[str, Any]:
    data = short_chats("saturated", rate=40, max_seqs=64)
    spec = data["latencyTarget"]["spec"]
    spec["objectives"]["ttft"]["threshold"] = "5ms"
    spec["evaluation"]["window"] = "60s"  # six canary intervals of two scrapes each
    return data


def _canary_running(replicas: int) -> tuple[ReplicatedDeployment, ContainerConfig]:
    """The world after the reconciler's two canary steps: ensure the canary, shrink main."""
    world = ReplicatedDeployment(parse_scenario(EASY), make_world("matched", 0), 0, replicas)
    world.advance(10.0)
    start = world.container
    trial = ContainerConfig(start.command, ("--max-num-seqs", "16"), start.image, start.gpu_limit)
    canaries = VirtualCanaries(world)
    main = DeploymentView(world.main.obj())
    asyncio.run(canaries.ensure(main, OWNER, container="vllm", config=trial,
                                gpu_resource="nvidia.com/gpu"))  # fmt: skip
    asyncio.run(canaries.scale(main, replicas - 1))
    world.advance(45.0)  # the canary's pod is ready 30 s after it started
    return world, trial


def test_the_canary_takes_one_pods_share_while_the_deployment_runs_one_replica_fewer() -> None:
    world, trial = _canary_running(3)
    assert world.canary is not None
    assert world.canary.name == canary_name("llama", TARGET)
    assert world.main.replicas == 2
    assert len(world.main.facts()) == 2
    assert all(p.config_fingerprint == world.container.fingerprint() for p in world.main.facts())
    (pod,) = world.canary.facts()
    assert pod.ready
    assert pod.config_fingerprint == trial.fingerprint()
    before = dict(world.service.handed)
    world.advance(105.0)
    handed = {k: v - before.get(k, 0) for k, v in world.service.handed.items()}
    total = sum(handed.values())
    assert abs(handed[pod.name] - total / 3) <= 1  # 1/N of the traffic, N = 3 pods serving
    assert world.container != trial  # the main template never moved


def test_the_production_canary_arms_select_the_canary_pod_and_the_baseline_pods() -> None:
    world, _ = _canary_running(3)
    assert world.canary is not None
    world.advance(105.0)
    canary_arm, baseline_arm = arms(MATCHERS, world.canary.name)
    canary = world.recorder.observe(end=105.0, seconds=40.0, percentiles=[90],
                                    matchers=canary_arm)  # fmt: skip
    baseline = world.recorder.observe(end=105.0, seconds=40.0, percentiles=[90],
                                      matchers=baseline_arm)  # fmt: skip
    # The Deployment's own selector (<deployment>-<hash>-<suffix>) never sees the canary's pod.
    main = world.recorder.observe(end=105.0, seconds=40.0, percentiles=[90])
    assert isinstance(canary, Observation)
    assert isinstance(baseline, Observation)
    assert isinstance(main, Observation)
    assert (canary.pods, baseline.pods, main.pods) == (1, 2, 2)
    # Each baseline pod took about what the canary took.
    assert 0.8 < (baseline.requests / 2) / canary.requests < 1.25


def test_a_rejected_canary_never_touches_the_main_deployments_configuration() -> None:
    # 40 req/s per pod at max-num-seqs 64 and an unreachable TTFT; the blind planner tries
    # max-num-seqs below 64 (no help, or much worse): every canary must be rejected, and none
    # of them may reach the main Deployment's pod template.
    data = _saturated()
    container = data["deployment"]["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--max-num-seqs", "64"]
    scenario = parse_scenario(data)
    result = run_operator(scenario, make_world("matched", 0), 0, budget=6, replicas=2,
                          strategy=Strategy.CANARY, blind=True)  # fmt: skip
    verdicts = [line.split(": ", 1)[1].split(" ", 1)[0] for line in result.history
                if " -> " in line and not line.startswith("end")]  # fmt: skip
    assert [v for v in verdicts if v != "Keep"], result.history
    assert result.canaries == len(verdicts)  # every trial ran on a canary
    # The main Deployment's container moved only to kept changes, once each (the promotion),
    # never to a rejected one and never back.
    assert result.templates == [start_container(scenario), *(to for _, to in result.kept)]
    assert len(result.kept) == verdicts.count("Keep")


def test_a_canary_that_keeps_up_beside_saturated_baseline_pods_is_kept_and_promoted() -> None:
    # 40 req/s per pod behind max-num-seqs 8: each baseline pod finishes fewer requests than
    # it is sent. The canary at 16 keeps up; it received the same share (arrivals, not
    # completions, are compared), so it is judged, kept and promoted.
    scenario = parse_scenario(_saturated())
    result = run_operator(scenario, make_world("matched", 0), 0, budget=6, replicas=2,
                          strategy=Strategy.CANARY)  # fmt: skip
    assert result.kept, result.history
    before, after = result.kept[0]
    assert before == start_container(scenario)
    assert "--max-num-seqs" in (after.args or ())
    assert int((after.args or ())[-1]) > 8
    assert result.templates[-1] == after
