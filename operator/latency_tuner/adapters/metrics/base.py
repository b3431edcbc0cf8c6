"""The one seam between the operator and any metrics backend."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.promql import LabelMatcher


class MetricsSource(Protocol):
    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        """The window ending at ``end`` (unix seconds; None = now) of the selected series.

        Returns ``NoData`` when nothing matches or nothing finished; raises ``MetricsError``
        when the source cannot answer.
        """
        ...
