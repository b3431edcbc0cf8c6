"""The N-replica virtual world: a Service splits the load evenly over the ready pods, and the
Deployment rolls one replica at a time like Kubernetes' default RollingUpdate."""

from __future__ import annotations

import asyncio
import copy

from tests.unit.benchmarks.support import EASY

from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.convergence.replicated import (
    ReplicatedDeployment,
    ReplicatedDeployments,
    surge_and_unavailable,
)
from latency_tuner.convergence.scenario import parse_scenario
from latency_tuner.convergence.world import make_world
from latency_tuner.core.cluster import ContainerConfig


def _world(replicas: int, data: dict[str, object] = EASY) -> ReplicatedDeployment:
    return ReplicatedDeployment(parse_scenario(data), make_world("matched", 0), 0, replicas)


def _with_seqs(container: ContainerConfig, seqs: int) -> ContainerConfig:
    return ContainerConfig(container.command, ("--max-num-seqs", str(seqs)), container.image,
                           container.gpu_limit)  # fmt: skip


def test_open_arrivals_are_handed_to_the_ready_replicas_in_turn() -> None:
    world = _world(3)
    world.advance(60.0)
    handed = world.service.handed
    assert len(handed) == 3
    assert max(handed.values()) - min(handed.values()) <= 1
    # The scenario's rate is per replica: 24 req/s each, three times that in all.
    assert 3 * 24 * 60 * 0.9 < sum(handed.values()) < 3 * 24 * 60 * 1.1
    served = [n for _, n in world.served()]
    assert sum(served) == world.service.finished


def test_closed_loop_users_are_spread_evenly_and_move_when_a_replica_goes() -> None:
    closed = copy.deepcopy(EASY)
    closed["workload"] = {"arrival": "closed", "users": 4, "promptTokens": 200,
                          "outputTokens": 40}  # fmt: skip
    world = _world(3, closed)
    world.advance(20.0)
    assert sorted(world.service.users_per_pod().values()) == [4, 4, 4]
    world.scale(world.main, 2)  # one replica goes: its 4 users go to the other two
    assert sorted(world.service.users_per_pod().values()) == [6, 6]
    before = dict(world.service.handed)
    world.advance(40.0)
    busy = [name for name, n in world.service.handed.items() if n > before.get(name, 0)]
    assert len(busy) == 2


def test_kubernetes_default_rolling_bounds() -> None:
    assert surge_and_unavailable(1) == (1, 0)
    assert surge_and_unavailable(2) == (1, 0)
    assert surge_and_unavailable(4) == (1, 1)
    assert surge_and_unavailable(10) == (3, 2)


def test_a_rollout_replaces_one_replica_at_a_time_and_never_serves_with_fewer() -> None:
    world = _world(2)
    new = _with_seqs(world.container, 16)
    view = DeploymentView(world.main.obj())
    asyncio.run(ReplicatedDeployments(world).patch_container(
        view, container="vllm", config=new, gpu_resource="nvidia.com/gpu"))  # fmt: skip
    seen_total = []
    for step in range(1, 20):
        world.advance(5.0 * step)
        pods = world.main.facts()
        seen_total.append(len(pods))
        assert sum(1 for p in pods if p.ready) >= 2  # maxUnavailable 0
        assert len(pods) <= 3  # maxSurge 1
    rollout = DeploymentView(world.main.obj()).rollout(world.main.facts())
    assert rollout.complete
    assert {p.config_fingerprint for p in world.main.facts()} == {new.fingerprint()}
    assert 3 in seen_total  # a surge pod was there while the old ones served
    assert world.service.short == 0


def test_a_configuration_that_cannot_start_stalls_the_rollout_and_rolling_back_is_at_once() -> None:
    world = _world(2)
    start = world.container
    broken = ContainerConfig(start.command, ("--max-num-seqs", "8", "-tp", "3"), start.image, 3)
    world.patch(world.main, broken)
    world.advance(90.0)
    rollout = DeploymentView(world.main.obj()).rollout(world.main.facts())
    assert not rollout.complete
    assert rollout.failure(broken.fingerprint()) is not None
    assert sum(1 for p in world.main.facts() if p.ready) == 2  # the old pods still serve
    world.patch(world.main, start)
    rollout = DeploymentView(world.main.obj()).rollout(world.main.facts())
    assert rollout.complete
    assert len(world.main.facts()) == 2
