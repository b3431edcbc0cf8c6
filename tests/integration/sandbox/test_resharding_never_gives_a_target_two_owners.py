"""Re-sharding from one operator shard to two, with real `latency-tuner run` processes against
the API emulator: the API server's own request log shows that no target is ever worked on by two
shards, that a new shard waits while the old one holds the claim, and that every target ends
owned by exactly the shard its hash names.

Each shard's requests carry its user agent (``latency-tuner/<shard> (<pod>)`` for the reconcile,
``latency-tuner-claims/...`` for the claims), so the log, in the order the server received the
requests, says who acted on which target when.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from tests.integration.sandbox.support import NAMESPACE, eventually

from latency_tuner.core.sharding.assignment import Sharding, hashed_shard
from latency_tuner.core.sharding.claim import CLAIM_ANNOTATION, finalizer_for
from latency_tuner.sandbox.cluster import Sandbox
from latency_tuner.sandbox.operator_process import OperatorProcess

LT_API = "tuning.latencytuner.io/v1alpha1"
TARGETS = [f"chat-{i}" for i in range(6)]
NEW_POD = {0: "tuner-a", 1: "tuner-b"}  # the two shards after the re-shard, by index
OLD_POD = "tuner-old"


def latency_target(name: str) -> dict[str, Any]:
    return {
        "apiVersion": LT_API,
        "kind": "LatencyTarget",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "targetRef": {"name": f"{name}-vllm", "container": "vllm"},  # none: Failed, fine
            "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
        },
    }


def shard(sandbox: Sandbox, tmp: Path, pod: str, index: int, shards: int) -> OperatorProcess:
    return OperatorProcess(
        kubeconfig=sandbox.kubeconfig_path,
        namespace=NAMESPACE,
        log_path=tmp / f"{pod}.log",
        prometheus_url=None,
        interval="0.5s",
        extra_args=["--shards", str(shards), "--shard-index", str(index), "--pod-name", pod,
                    "--shard-lease", "3s"],
    )  # fmt: skip


def owner(name: str) -> int:
    return hashed_shard(NAMESPACE, name, 2)


async def claims(sandbox: Sandbox) -> dict[str, dict[str, Any] | None]:
    found = {}
    for name in TARGETS:
        obj = await sandbox.get(LT_API, "LatencyTarget", name, namespace=NAMESPACE)
        text = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(CLAIM_ANNOTATION)
        found[name] = json.loads(text) if text else None
    return found


def requests_on_targets(sandbox: Sandbox) -> list[tuple[str, str, str]]:
    """(who, what, target) for each request on a LatencyTarget, in the server's order; who is
    the pod, what is "act" (the reconcile's reads and writes) or "claim"."""
    seen = []
    for r in list(sandbox.api_server.emulator):
        agent = next((v for k, v in r.headers.items() if k.lower() == "user-agent"), "")
        if "/latencytargets/" not in r.url.path or "(" not in agent:
            continue
        what = "claim" if agent.startswith("latency-tuner-claims/") else "act"
        if agent.startswith("latency-tuner"):
            seen.append((agent.rsplit("(", 1)[1].rstrip(")"), what, str(r.name)))
    return seen


def finalizer_writes(sandbox: Sandbox, target: str) -> int:
    """PATCHes that set the target's finalizers (kopf's, and a takeover's)."""
    count = 0
    for r in list(sandbox.api_server.emulator):
        if getattr(r.method, "value", r.method) != "PATCH":
            continue
        if not r.url.path.endswith(f"/latencytargets/{target}"):
            continue
        if isinstance(r.data, list):  # a JSON patch
            count += any(
                str(op.get("path", "")).startswith("/metadata/finalizers") for op in r.data
            )
        else:
            count += "finalizers" in ((r.data or {}).get("metadata") or {})
    return count


def acts(log: list[tuple[str, str, str]], target: str) -> list[str]:
    return [who for who, what, name in log if what == "act" and name == target]


def runs(actors: list[str]) -> list[str]:
    """The actors in the order they took turns: [a, a, b, b] -> [a, b]."""
    return [a for i, a in enumerate(actors) if i == 0 or actors[i - 1] != a]


@pytest.mark.parametrize("old_leaves", ["stopped", "killed"])
async def test_resharding_from_one_to_two_shards_never_gives_a_target_two_owners(
    tmp_path: Path, old_leaves: str
) -> None:
    async with Sandbox(namespace=NAMESPACE, prometheus=False, load=False) as sandbox:
        sandbox.api_server.emulator.requests_kept = 1_000_000  # the whole run, for the audit
        assert {owner(n) for n in TARGETS} == {0, 1}  # both new shards get targets
        for name in TARGETS:
            await sandbox.apply(latency_target(name))
        old = shard(sandbox, tmp_path, OLD_POD, 0, 1)
        newcomers = {i: shard(sandbox, tmp_path, pod, i, 2) for i, pod in NEW_POD.items()}
        try:
            await asyncio.to_thread(old.start)

            async def all_held_by_old() -> bool:
                return all(
                    (c or {}).get("pod") == OLD_POD for c in (await claims(sandbox)).values()
                )

            await eventually(all_held_by_old, within=60)

            # Shard 1 of the new count starts while the old shard still runs and holds its
            # targets: it must wait, and say so, rather than act.
            await asyncio.to_thread(newcomers[1].start)
            theirs = [n for n in TARGETS if owner(n) == 1]

            async def waited() -> bool:
                text = newcomers[1].log_path.read_text()
                return all(f"{NAMESPACE}/{n}: shard 1/2 (tuner-b) waits" in text for n in theirs)

            await eventually(waited, within=60)
            assert not any(who == NEW_POD[1] for who, _, _ in requests_on_targets(sandbox))

            # The old shard goes (gracefully: it releases; or crashes: its lease runs out), and
            # shard 0 of the new count replaces it.
            await asyncio.to_thread(old.stop if old_leaves == "stopped" else old.kill)
            await asyncio.to_thread(newcomers[0].start)

            async def all_with_their_owner() -> dict[str, Any] | None:
                found = await claims(sandbox)
                right = {n: (c or {}).get("pod") == NEW_POD[owner(n)] for n, c in found.items()}
                return None if not all(right.values()) else found

            await eventually(all_with_their_owner, within=60)

            async def every_owner_acted_again() -> bool:
                log = requests_on_targets(sandbox)
                return all(acts(log, n).count(NEW_POD[owner(n)]) >= 3 for n in TARGETS)

            await eventually(every_owner_acted_again, within=60)
        finally:
            for process in [old, *newcomers.values()]:
                await asyncio.to_thread(process.stop)

        log = requests_on_targets(sandbox)
        for name in TARGETS:
            # One hand-over, old to the target's new shard: never back, never to the other.
            assert runs(acts(log, name)) == [OLD_POD, NEW_POD[owner(name)]], name
            target = await sandbox.get(LT_API, "LatencyTarget", name, namespace=NAMESPACE)
            assert (target or {}).get("status", {}).get("shard") == f"{owner(name)}/2"
            # Only the owner's finalizer is left, and no two shards took turns rewriting it.
            finalizers = (target or {})["metadata"].get("finalizers")
            assert finalizers == [finalizer_for(Sharding(owner(name), 2))]
            # (Shards sharing one finalizer rewrite it on every watch event: dozens a second.)
            assert finalizer_writes(sandbox, name) <= 12
        if old_leaves == "stopped":
            text = old.log_path.read_text()
            assert all(f"{NAMESPACE}/{n}: shard 0/1 ({OLD_POD}) released" in text for n in TARGETS)


async def test_in_label_mode_each_shard_watches_and_works_on_only_the_targets_its_label_names(
    tmp_path: Path,
) -> None:
    labels = {"chat-0": "1", "chat-1": "0", "chat-2": None, "chat-3": "7"}  # 7: no such shard
    wanted = {"chat-0": 1, "chat-1": 0, "chat-2": 0, "chat-3": 0}
    async with Sandbox(namespace=NAMESPACE, prometheus=False, load=False) as sandbox:
        sandbox.api_server.emulator.requests_kept = 1_000_000
        for name, value in labels.items():
            manifest = latency_target(name)
            if value is not None:
                manifest["metadata"]["labels"] = {"latencytuner.io/shard": value}
            await sandbox.apply(manifest)
        shards = [shard(sandbox, tmp_path, NEW_POD[i], i, 2) for i in (0, 1)]
        for process in shards:
            process.extra_args += ["--shard-mode", "label"]
        try:
            for process in shards:
                await asyncio.to_thread(process.start)

            async def claimed_as_labelled() -> bool:
                found = await claims(sandbox)
                return all((found[n] or {}).get("pod") == NEW_POD[i] for n, i in wanted.items())

            await eventually(claimed_as_labelled, within=60)
        finally:
            for process in shards:
                await asyncio.to_thread(process.stop)
        log = requests_on_targets(sandbox)
        for name, index in wanted.items():
            assert set(acts(log, name)) == {NEW_POD[index]}, name
            target = await sandbox.get(LT_API, "LatencyTarget", name, namespace=NAMESPACE)
            finalizers = (target or {})["metadata"].get("finalizers")
            assert finalizers == [finalizer_for(Sharding(index, 2, "label"))]
            assert finalizer_writes(sandbox, name) <= 12
        selectors = {
            r.params.get("labelSelector")
            for r in list(sandbox.api_server.emulator)
            if r.url.path.endswith("/latencytargets") and r.params.get("watch") == "true"
        }
        assert selectors == {"latencytuner.io/shard notin (1)", "latencytuner.io/shard=1"}
