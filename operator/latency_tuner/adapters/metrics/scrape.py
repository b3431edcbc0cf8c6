"""The direct-scrape backend: reads the pods' ``/metrics`` itself, keeps a bounded ring of samples.

For clusters without Prometheus and for the demo. Each target's samples are stored under the
target labels a Prometheus would attach (``namespace``, ``pod``, ``container``), so the same
label matchers select them, and windows are answered by ``core.signals.evaluate_on_series``
with Prometheus' own arithmetic (``core.prommath``).

The pods are the tenant's: a scrape is capped in bytes, in time and in series, and parsed on a
worker thread, so no pod can fill the operator's memory or stall its event loop. The samples
are kept and read on that one worker thread only (so storing and reading never race), and the
label matchers' regular expressions run there with RE2, in time linear in the label's length,
never Python's backtracking ``re`` (``(a+)+`` against a long label would take seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
import re2
from prometheus_client.parser import text_string_to_metric_families

from latency_tuner.adapters.metrics.errors import QueryFailed, SourceUnreachable
from latency_tuner.core import signals
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.prommath import Point
from latency_tuner.core.promql import LabelMatcher


@dataclass(frozen=True)
class ScrapeTarget:
    url: str  # full URL of the metrics endpoint, e.g. http://10.0.0.5:8000/metrics
    labels: Mapping[str, str] = field(default_factory=dict)


class ScrapeTooLarge(Exception):
    """A target answered with more bytes or series than a scrape may hold."""


# What a vLLM server exposes: a few hundred series and well under a megabyte, even with many
# models or LoRA adapters. Far above that is a misconfiguration or an attack.
MAX_SCRAPE_BYTES = 8 * 1024 * 1024
MAX_SERIES_PER_TARGET = 20_000

Sample = tuple[str, frozenset[tuple[str, str]], float]
_T = TypeVar("_T")


def parse_exposition(
    text: str, target_labels: Mapping[str, str], *, max_series: int
) -> list[Sample]:
    """The samples of one scrape with the target's labels; pure CPU work, run on a thread."""
    out: list[Sample] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue  # prometheus-client's creation timestamps are not series we use
            out.append(
                (sample.name, frozenset({**sample.labels, **target_labels}.items()), sample.value)
            )
            if len(out) > max_series:
                raise ScrapeTooLarge(f"more than {max_series} series")
    return out


class ScrapeSource:
    """A ``MetricsSource`` that scrapes targets on an interval into a bounded ring."""

    def __init__(
        self,
        targets: Callable[[], Sequence[ScrapeTarget]],
        *,
        retention_seconds: float = 1800.0,
        max_samples_per_series: int = 4096,
        timeout_seconds: float = 5.0,
        max_bytes: int = MAX_SCRAPE_BYTES,
        max_series_per_target: int = MAX_SERIES_PER_TARGET,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._targets = targets
        self._retention = retention_seconds
        self._max_samples = max_samples_per_series
        self._timeout = timeout_seconds
        self._max_bytes = max_bytes
        self._max_series = max_series_per_target
        self._clock = clock
        self._series: dict[signals.SeriesKey, deque[Point]] = {}
        self._client = httpx.AsyncClient(timeout=timeout_seconds, follow_redirects=False)
        # Parsing, storing and reading samples: one thread of its own, never the event loop or a
        # shared pool, and one thread only, so the ring is never read while it is written.
        self._parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scrape-samples")
        self.last_errors: dict[str, str] = {}

    async def aclose(self) -> None:
        await self._client.aclose()
        self._parser.shutdown(wait=False, cancel_futures=True)

    async def scrape_once(self) -> int:
        """Scrape every target once; returns how many answered. Failures are kept per target."""
        targets = list(self._targets())
        results = await asyncio.gather(*(self._scrape(t) for t in targets))
        await self._on_worker(self._forget_old, self._clock())
        return sum(results)

    async def _on_worker(self, job: Callable[..., _T], *args: object) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._parser, job, *args)

    async def run(self, interval_seconds: float, stop: asyncio.Event) -> None:
        """Scrape every ``interval_seconds`` until ``stop`` is set."""
        while not stop.is_set():
            await self.scrape_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_seconds)

    async def _scrape(self, target: ScrapeTarget) -> bool:
        at = self._clock()
        try:
            async with asyncio.timeout(self._timeout):
                text = await self._fetch(target.url)
            await self._on_worker(self.ingest, text, target.labels, at)
        except (httpx.HTTPError, ScrapeTooLarge, TimeoutError, ValueError) as exc:
            # ValueError: the parser's word for text that is not the exposition format.
            self.last_errors[target.url] = _cause(exc)
            return False
        self.last_errors.pop(target.url, None)
        return True

    async def _fetch(self, url: str) -> str:
        """The body, read up to ``max_bytes``; more is refused before it is held."""
        async with self._client.stream("GET", url) as response:
            response.raise_for_status()
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self._max_bytes:
                    raise ScrapeTooLarge(f"more than {self._max_bytes} bytes")
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")

    def ingest(self, text: str, target_labels: Mapping[str, str], at: float) -> None:
        """Add one scrape's samples (exposition text) at time ``at`` (on the worker thread, or
        where nothing else touches this source)."""
        self._store(parse_exposition(text, target_labels, max_series=self._max_series), at)

    def _store(self, samples: Iterable[Sample], at: float) -> None:
        for name, labels, value in samples:
            ring = self._series.get((name, labels))
            if ring is None:
                ring = self._series[(name, labels)] = deque(maxlen=self._max_samples)
            ring.append((at, float(value)))

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
        wanted = tuple(percentiles)
        return await self._on_worker(self._observe, tuple(matchers), window_seconds, wanted, stop)

    def _observe(
        self,
        matchers: tuple[LabelMatcher, ...],
        window_seconds: float,
        percentiles: tuple[int, ...],
        stop: float,
    ) -> ObservationResult:
        """On the worker thread: select the series with RE2, then evaluate them as PromQL
        would (``core.signals``, given the selected series and no matcher left to apply)."""
        selected = select_series(self._series, matchers)
        start = stop - window_seconds
        results = {
            q: signals.evaluate_on_series(q, selected, matchers=(), start=start, end=stop)
            for q in signals.queries_for(percentiles)
        }
        return signals.assemble(
            results,
            window_seconds=window_seconds,
            cache_config=signals.cache_config_from_series(selected, (), start=start, end=stop),
        )


def select_series(
    series: Mapping[signals.SeriesKey, deque[Point]], matchers: Sequence[LabelMatcher]
) -> dict[signals.SeriesKey, deque[Point]]:
    """The series the matchers select, with PromQL's semantics (a missing label is "", regexes
    are anchored) and RE2's linear-time regular expressions, as Prometheus itself uses."""
    try:
        compiled = [(m, re2.compile(m.value) if m.op in ("=~", "!~") else None) for m in matchers]
    except re2.error as exc:
        raise QueryFailed(f"a label matcher is not an RE2 regular expression: {exc}") from exc

    def keep(labels: signals.Labels) -> bool:
        values = dict(labels)
        for m, pattern in compiled:
            value = values.get(m.label, "")
            if pattern is None:
                if (value == m.value) != (m.op == "="):
                    return False
            elif (pattern.fullmatch(value) is not None) != (m.op == "=~"):
                return False
        return True

    return {key: points for key, points in series.items() if keep(key[1])}


def _cause(exc: Exception) -> str:
    """One short line for a condition message, never httpx's multi-line text."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "timed out"
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= 160 else text[:160] + "..."
