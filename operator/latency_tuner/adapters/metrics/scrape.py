"""The direct-scrape backend: reads the pods' ``/metrics`` itself, keeps a bounded ring of samples.

For clusters without Prometheus and for the demo. Each target's samples are stored under the
target labels a Prometheus would attach (``namespace``, ``pod``, ``container``), so the same
label matchers select them, and windows are answered by ``core.signals.evaluate_on_series``
with Prometheus' own arithmetic (``core.prommath``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from latency_tuner.adapters.metrics.errors import SourceUnreachable
from latency_tuner.core import signals
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.prommath import Point
from latency_tuner.core.promql import LabelMatcher


@dataclass(frozen=True)
class ScrapeTarget:
    url: str  # full URL of the metrics endpoint, e.g. http://10.0.0.5:8000/metrics
    labels: Mapping[str, str] = field(default_factory=dict)


class ScrapeSource:
    """A ``MetricsSource`` that scrapes targets on an interval into a bounded ring."""

    def __init__(
        self,
        targets: Callable[[], Sequence[ScrapeTarget]],
        *,
        retention_seconds: float = 1800.0,
        max_samples_per_series: int = 4096,
        timeout_seconds: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._targets = targets
        self._retention = retention_seconds
        self._max_samples = max_samples_per_series
        self._clock = clock
        self._series: dict[signals.SeriesKey, deque[Point]] = {}
        self._client = httpx.AsyncClient(timeout=timeout_seconds)
        self.last_errors: dict[str, str] = {}

    async def aclose(self) -> None:
        await self._client.aclose()

    async def scrape_once(self) -> int:
        """Scrape every target once; returns how many answered. Failures are kept per target."""
        targets = list(self._targets())
        results = await asyncio.gather(*(self._scrape(t) for t in targets))
        self._forget_old(self._clock())
        return sum(results)

    async def run(self, interval_seconds: float, stop: asyncio.Event) -> None:
        """Scrape every ``interval_seconds`` until ``stop`` is set."""
        while not stop.is_set():
            await self.scrape_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_seconds)

    async def _scrape(self, target: ScrapeTarget) -> bool:
        try:
            response = await self._client.get(target.url)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            self.last_errors[target.url] = str(exc) or type(exc).__name__
            return False
        self.last_errors.pop(target.url, None)
        self.ingest(response.text, target.labels, at=self._clock())
        return True

    def ingest(self, text: str, target_labels: Mapping[str, str], *, at: float) -> None:
        """Add one scrape's samples (exposition text) at time ``at``."""
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue  # prometheus-client's creation timestamps are not series we use
                labels = frozenset({**sample.labels, **target_labels}.items())
                ring = self._series.get((sample.name, labels))
                if ring is None:
                    ring = self._series[(sample.name, labels)] = deque(maxlen=self._max_samples)
                ring.append((at, float(sample.value)))

    def _forget_old(self, now: float) -> None:
        horizon = now - self._retention
        for key in list(self._series):
            ring = self._series[key]
            while ring and ring[0][0] < horizon:
                ring.popleft()
            if not ring:
                del self._series[key]

    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        if not self._series and self.last_errors:
            raise SourceUnreachable(
                "no target could be scraped: "
                + "; ".join(f"{url}: {err}" for url, err in sorted(self.last_errors.items()))
            )
        stop = self._clock() if end is None else end
        start = stop - window_seconds
        results = {
            q: signals.evaluate_on_series(q, self._series, matchers=matchers, start=start, end=stop)
            for q in signals.queries_for(percentiles)
        }
        return signals.assemble(
            results,
            window_seconds=window_seconds,
            cache_config=signals.cache_config_from_series(
                self._series, matchers, start=start, end=stop
            ),
        )
