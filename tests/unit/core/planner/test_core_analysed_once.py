"""A window is analysed once: the planner reuses the ranking its diagnosis made."""

from __future__ import annotations

import pytest
from tests.unit.core.builders import H100, command_line, knobs, objectives, queueing

from latency_tuner.core import candidates
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.planner import plan


def test_diagnosing_then_planning_the_same_window_ranks_the_candidates_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = 0
    real = candidates.rank

    def counted(*args: object, **kwargs: object) -> candidates.Ranking:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(candidates, "rank", counted)
    window, cl, spec, goal = queueing(), command_line(), knobs(), objectives(ttft="500ms")
    diagnosis = diagnose(window, goal, cl, H100, spec)
    first = plan(diagnosis, window, cl, spec, H100)
    assert calls == 1
    # Another window (or anything else) than the one diagnosed is ranked afresh, and the
    # cached path proposes what a fresh ranking would.
    other = knobs(maxNumSeqs={"min": 16, "max": 64})
    plan(diagnosis, window, cl, other, H100)
    assert calls == 2
    fresh = plan(diagnose(window, goal, cl, H100, spec), window, cl, spec, H100)
    assert first == fresh
