"""One reconcile of one LatencyTarget: gather (ports) -> decide (core) -> act (ports).

``Reconciler.run`` reads the LatencyTarget fresh, gathers the facts ``core.rollout.decide``
needs, writes the status it returns (one status write per step), applies the container change
it asks for (guarded: a Deployment changed since it was read is read again, never overwritten),
and repeats at once while the decision says so, at most ``MAX_STEPS`` times (a trial is
recorded before it is applied). It returns what it did; the caller posts the events. No decision
is taken here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from latency_tuner.api.conditions import ConditionType, set_condition
from latency_tuner.api.resource import API_VERSION, KIND, InvalidLatencyTarget, LatencyTarget
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus, Phase
from latency_tuner.controller.attribution import CHANGE_CAUSE, Action, change_annotations
from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.errors import StaleWrite
from latency_tuner.controller.gather import Claims, gather, gpu_resource
from latency_tuner.controller.ports import Ports
from latency_tuner.core.canary import Owner
from latency_tuner.core.rollout import (
    Decision,
    Facts,
    Note,
    Ready,
    Reason,
    decide,
    windows_needed,
)
from latency_tuner.core.trust import change_refusal

log = logging.getLogger("latency_tuner.controller")

MAX_STEPS = 6  # decisions chained in one reconcile (intent, patch, ...); the rest waits


@dataclass
class Outcome:
    """What a reconcile did, for the caller (events) and the operator's own metrics."""

    notes: list[Note] = field(default_factory=list)
    status: LatencyTargetStatus | None = None
    initial: LatencyTargetStatus | None = None  # the status as read when the reconcile began
    patched: int = 0
    reasons: list[str] = field(default_factory=list)  # each step's decision, for logs and tests
    transitions: list[tuple[Phase, Phase]] = field(default_factory=list)  # phases, in order
    changes: list[str] = field(default_factory=list)  # the change-cause of each patch applied


class Reconciler:
    """The loop around ``decide``; the ports it uses are given, never global."""

    def __init__(self, ports: Ports, *, variant_images: Sequence[str] = ()) -> None:
        self.ports = ports
        self.variant_images = tuple(variant_images)

    async def run(self, body: Mapping[str, Any], *, claims: Claims | None = None) -> Outcome:
        """One reconcile of the LatencyTarget ``body`` names. ``claims``: the LatencyTargets
        naming the same Deployment, as (creationTimestamp, name) pairs from the handlers'
        index; None lists them instead."""
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        # The body a handler was given may predate the status our previous reconcile wrote
        # (a change handler queued behind the lock, a watch event not yet arrived): deciding
        # on that stale status could start a second trial or mistake our own patch for an
        # outside change. The status is our memory, so read it fresh.
        fresh = await self.ports.latencytargets.get(namespace=namespace, name=name)
        if fresh is None:
            return Outcome()
        meta = fresh.get("metadata") or {}
        generation = int(meta.get("generation") or 1)
        status = LatencyTargetStatus.model_validate(fresh.get("status") or {})
        outcome = Outcome(status=status, initial=status)
        try:
            target = LatencyTarget.from_manifest(fresh)
        except InvalidLatencyTarget as exc:
            await self._invalid_spec(namespace, name, generation, status, exc, outcome)
            return outcome
        spec = target.spec
        owner = owner_of(fresh) if self.ports.canaries is not None else None
        facts: Facts | None = None
        now, seen, written = self.ports.clock(), status, status
        for _ in range(MAX_STEPS):
            if facts is None or not reusable(spec, seen, status, now):
                now = self.ports.clock()
                facts = await gather(
                    self.ports, spec, status, namespace, name, now, claims=claims, owner=owner
                )
                seen = status
            # Pure but not free (the model may forecast a wide space: ~0.1 s), so off the event
            # loop: one target's decision must not hold up every other target's I/O.
            decision = await asyncio.to_thread(decide, spec, generation, status, facts, now)
            outcome.reasons.append(decision.reason)
            outcome.transitions.extend(decision.transitions)
            outcome.notes.extend(decision.notes)
            outcome.status = status = decision.status
            # The status is our memory: written before any change to the world. Steps that
            # only decide (a re-check: Converged -> Observing -> Converged) are written once,
            # at the end; were we stopped between them, the next round decides them again.
            moves_canary = decision.canary is not None and owner is not None
            acts = decision.apply is not None or moves_canary
            if status != written and (acts or not decision.again):
                await self.ports.latencytargets.write_status(
                    namespace=namespace, name=name, status=status
                )
                written = status
            seen_facts = facts
            if decision.apply is not None:
                if not await self._apply(
                    decision, spec, facts, outcome, generation, namespace, name
                ):
                    break
                facts = None  # the world changed: gather again
            if moves_canary:
                assert owner is not None
                if not await self._canary(decision, spec, seen_facts, outcome, owner, generation):
                    break
                facts = None
            if not decision.again:
                break
        else:  # MAX_STEPS decisions in a row, none of them acting
            if status != written:
                await self.ports.latencytargets.write_status(
                    namespace=namespace, name=name, status=status
                )
        return outcome

    async def _invalid_spec(
        self,
        namespace: str,
        name: str,
        generation: int,
        status: LatencyTargetStatus,
        exc: InvalidLatencyTarget,
        outcome: Outcome,
    ) -> None:
        message = "; ".join(exc.problems)
        now = self.ports.clock()
        conditions = set_condition(
            status.conditions, ConditionType.READY, False, "InvalidSpec", message, now, generation
        )
        new = status.model_copy(
            update={
                "conditions": conditions,
                "phase": Phase.FAILED,
                "observed_generation": generation,
            }
        )
        if new != status:
            await self.ports.latencytargets.write_status(namespace=namespace, name=name, status=new)
            outcome.notes.append(Reason.INVALID_SPEC.note(message))
        outcome.status = new

    async def _apply(
        self,
        decision: Decision,
        spec: LatencyTargetSpec,
        facts: Facts,
        outcome: Outcome,
        generation: int,
        namespace: str,
        name: str,
    ) -> bool:
        # Only a round that saw the Deployment (Ready) can ask for a change.
        assert decision.apply is not None and isinstance(facts, Ready)
        # Whatever the decision took its container from (a status others can write), the
        # patch must be one the knob catalog could make; anything else is refused, not applied.
        refusal = change_refusal(
            facts.container, decision.apply, spec, allowed_images=self.variant_images
        )
        if refusal is not None:
            await self._refuse(refusal, generation, namespace, name, outcome)
            return False
        view = DeploymentView(dict(facts.deployment))
        trial = decision.status.current_trial
        annotations = change_annotations(
            namespace=namespace,
            name=name,
            action=Action.ROLLBACK if decision.status.phase is Phase.ROLLING_BACK else Action.TRIAL,
            before=facts.container,
            after=decision.apply,
            trial=trial.id if trial else None,
            knob=trial.knob if trial else None,
        )
        try:
            await self.ports.deployments.patch_container(
                view,
                container=spec.target_ref.container,
                config=decision.apply,
                gpu_resource=gpu_resource(self.ports, spec),
                annotations=annotations,
            )
        except StaleWrite:
            # The Deployment changed since we read it: read again next step, never overwrite.
            log.info("Deployment %s changed while patching; retrying", view.name)
            return False
        outcome.patched += 1
        outcome.changes.append(annotations[CHANGE_CAUSE])
        return True

    async def _canary(
        self,
        decision: Decision,
        spec: LatencyTargetSpec,
        facts: Facts | None,
        outcome: Outcome,
        owner: Owner,
        generation: int,
    ) -> bool:
        """Move the canary and the main Deployment's replicas where the decision wants them:
        create or move the canary, then the replica count, then remove the canary."""
        assert decision.canary is not None and isinstance(facts, Ready)
        assert self.ports.canaries is not None
        action, canaries = decision.canary, self.ports.canaries
        namespace, name = owner_namespace(facts), owner.name
        main = DeploymentView(dict(facts.deployment))
        trial = decision.status.current_trial
        try:
            if action.ensure is not None:
                # The canary's container comes from the status too: the same refusal applies.
                refusal = change_refusal(
                    facts.container, action.ensure, spec, allowed_images=self.variant_images
                )
                if refusal is not None:
                    await self._refuse(refusal, generation, namespace, name, outcome)
                    return False
                annotations = change_annotations(
                    namespace=namespace,
                    name=name,
                    action=Action.TRIAL,
                    before=facts.container,
                    after=action.ensure,
                    trial=trial.id if trial else None,
                    knob=trial.knob if trial else None,
                )
                await canaries.ensure(
                    main,
                    owner,
                    container=spec.target_ref.container,
                    config=action.ensure,
                    gpu_resource=gpu_resource(self.ports, spec),
                    annotations=dict(annotations),
                )
                outcome.changes.append(f"canary: {annotations[CHANGE_CAUSE]}")
            if action.main_replicas is not None and main.rollout().replicas != action.main_replicas:
                await canaries.scale(main, action.main_replicas)
                outcome.changes.append(f"Deployment {main.name}: {action.main_replicas} replicas")
            if action.remove and await canaries.remove(main, owner):
                outcome.changes.append(f"canary of {main.name} removed")
        except StaleWrite:
            log.info("Deployment %s changed while moving its canary; retrying", main.name)
            return False
        return True

    async def _refuse(
        self, refusal: str, generation: int, namespace: str, name: str, outcome: Outcome
    ) -> None:
        status = outcome.status or LatencyTargetStatus()
        message = f"a change was refused and not applied: {refusal}"
        conditions = set_condition(
            status.conditions,
            ConditionType.DEGRADED,
            True,
            Reason.CHANGE_REFUSED.value,
            message,
            self.ports.clock(),
            generation,
        )
        new = status.model_copy(update={"conditions": conditions})
        if new != status:
            await self.ports.latencytargets.write_status(namespace=namespace, name=name, status=new)
            outcome.notes.append(Reason.CHANGE_REFUSED.note(message))
        outcome.status = new
        log.warning("%s/%s: %s", namespace, name, message)


def owner_of(obj: Mapping[str, Any]) -> Owner:
    """The LatencyTarget as the owner of the canaries it makes."""
    meta = obj.get("metadata") or {}
    return Owner(
        api_version=str(obj.get("apiVersion") or API_VERSION),
        kind=str(obj.get("kind") or KIND),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
    )


def owner_namespace(facts: Ready) -> str:
    return str((facts.deployment.get("metadata") or {}).get("namespace", ""))


def reusable(
    spec: LatencyTargetSpec,
    gathered_for: LatencyTargetStatus,
    status: LatencyTargetStatus,
    now: datetime,
) -> bool:
    """Whether the next step may decide on the facts already gathered this reconcile: nothing
    was applied since (the caller drops them when something was) and the new phase wants the
    same windows (a re-check after the cooldown: Converged -> Observing needs the window just
    read, not a second gather)."""
    return windows_needed(spec, gathered_for, now) == windows_needed(spec, status, now)
