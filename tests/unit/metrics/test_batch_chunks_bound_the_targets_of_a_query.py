"""A batch over more targets than one query may cover is asked in chunks of whole namespaces;
a chunk whose query fails fails only its own namespaces' targets, and they ask again at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from latency_tuner.adapters.metrics import SourceUnreachable
from latency_tuner.adapters.metrics.batch import BatchedPrometheus
from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.core.observation import NoData
from latency_tuner.core.promql import default_matchers


class _Answers(PrometheusSource):
    """Below the HTTP seam: every query answers no rows, except that a query naming
    ``failing`` fails as an unreachable server would."""

    def __init__(self, failing: str = "") -> None:
        super().__init__(PrometheusSettings(url="http://127.0.0.1:9"))
        self.failing = failing
        self.expressions: list[str] = []

    def _query(self, expr: str, end: float | None, deadline: float) -> list[dict[str, Any]]:
        self.expressions.append(expr)
        if self.failing and self.failing in expr:
            raise SourceUnreachable("timed out")
        return []


async def test_whole_namespaces_are_packed_up_to_the_limit_and_a_big_one_stands_alone() -> None:
    batched = BatchedPrometheus(_Answers(), max_age=60, max_targets=4)
    fleet = {"a": 3, "b": 1, "c": 6, "d": 2, "e": 2}  # targets per namespace
    try:
        for namespace, targets in fleet.items():
            for i in range(targets):
                matchers = default_matchers(namespace, f"model-{i}")
                await batched.observe_recent(matchers=matchers, window_seconds=30, end=1000.0)
        assert batched.chunks(["e", "d", "c", "b", "a"]) == [["a", "b"], ["c"], ["d", "e"]]
        # A namespace no target asked for yet weighs one.
        assert batched.chunks(["x", "y"]) == [["x", "y"]]
    finally:
        batched.close()


async def test_a_failing_chunk_fails_only_its_own_targets() -> None:
    source = _Answers(failing='"team-b"')
    batched = BatchedPrometheus(source, max_age=60, max_targets=1)
    ok, bad = default_matchers("team-a", "llama"), default_matchers("team-b", "llama")
    try:
        results = await asyncio.gather(
            batched.observe_recent(matchers=ok, window_seconds=30, end=1000.0),
            batched.observe_recent(matchers=bad, window_seconds=30, end=1000.0),
            return_exceptions=True,
        )
        assert isinstance(results[0], NoData)
        assert isinstance(results[1], SourceUnreachable)
        assert batched.batches_sent == 1
        # Each chunk asked for its own namespace only.
        assert all(('"team-a"' in e) != ('"team-b"' in e) for e in source.expressions)
        # The failed namespace asks again at once; the answered one is still served.
        asked = len(source.expressions)
        assert isinstance(
            await batched.observe_recent(matchers=ok, window_seconds=30, end=1001.0), NoData
        )
        assert len(source.expressions) == asked
        with pytest.raises(SourceUnreachable):
            await batched.observe_recent(matchers=bad, window_seconds=30, end=1001.0)
        assert batched.batches_sent == 2
    finally:
        batched.close()
