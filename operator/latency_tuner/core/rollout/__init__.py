"""The tuning loop's phases and the one decision function that moves between them.

``decide(spec, generation, status, facts, now)`` reads the resource's spec and status, what the
operator saw this round (``Facts``: ``Blocked`` and why, or ``Ready`` with the Deployment, its
container and rollout, the metrics ``Windows``) and the time, and returns a ``Decision``: the
new status, at most one container change to apply, events to post (``Note``, reasons from
``Reason``), and whether to run again at once. It never talks to anything.

Everything needed to resume lives in ``.status``: the trial in flight carries the container it
came from and the one it rolls out, so a restarted operator recognises where the Deployment
stands by fingerprint. Acting is idempotent: a phase that wants the Deployment at a
configuration applies it only if the Deployment is not there yet, so a restart between the
patch and the status write never patches twice. A trial is recorded in the status (intent)
before its patch is applied.

Transitions (``TRANSITIONS`` is the table, ``PHASES`` the step of each phase; a test walks
them)::

    Observing -> Converged | Exhausted | RollingOut | Observing (Off / Recommend: advice only)
    RollingOut -> Settling | RollingBack (failed to start)
    Settling -> Measuring | RollingBack (crashed while warming up)
    Measuring -> Observing (Keep) | RollingBack (Revert, Inconclusive twice, crash)
    RollingBack -> Observing
    Converged | Exhausted -> Observing (after the cooldown, or a new spec)
    any -> Paused (spec.paused, or someone else changed the container mid-trial)
    any -> Failed (no Deployment, no such container, not vLLM, another LatencyTarget owns it)
    Paused | Failed -> Observing, or back into the trial in flight (RollingOut | RollingBack)

Modules: ``facts`` (what a round saw, which windows), ``events`` (reasons), ``state`` (a round
in the making), ``guards`` (the checks of every round), ``observing`` and ``trial`` (the
phases), ``analysis`` (a window analysed once), ``values`` (status values), ``machine``
(``decide`` and the tables). Pure: no I/O, no clock.
"""

from latency_tuner.core.rollout.analysis import Analysis, analyse, propose, propose_margin
from latency_tuner.core.rollout.events import Note, Reason
from latency_tuner.core.rollout.facts import (
    BASELINE_SUBWINDOWS,
    Blocked,
    Blocker,
    Facts,
    MetricsFailure,
    Ready,
    Window,
    WindowResult,
    Windows,
    windows_needed,
)
from latency_tuner.core.rollout.machine import ALWAYS_ALLOWED, PHASES, TRANSITIONS, decide
from latency_tuner.core.rollout.state import Decision
from latency_tuner.core.rollout.values import (
    baseline_container,
    diagnosis_status,
    target_container,
)

__all__ = [
    "ALWAYS_ALLOWED",
    "BASELINE_SUBWINDOWS",
    "PHASES",
    "TRANSITIONS",
    "Analysis",
    "Blocked",
    "Blocker",
    "Decision",
    "Facts",
    "MetricsFailure",
    "Note",
    "Ready",
    "Reason",
    "Window",
    "WindowResult",
    "Windows",
    "analyse",
    "baseline_container",
    "decide",
    "diagnosis_status",
    "propose",
    "propose_margin",
    "target_container",
    "windows_needed",
]
