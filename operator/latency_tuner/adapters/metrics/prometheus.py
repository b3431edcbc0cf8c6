"""The Prometheus backend: named PromQL templates through prometheus-api-client.

prometheus-api-client is a blocking (requests) client: every call runs in a worker thread so the
operator's event loop never waits on the network. One ``observe`` first asks which vLLM metric
names the selected series carry (current or pre-0.11 names), then evaluates every aggregate of
``core.signals`` with that name.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException

from latency_tuner.adapters.metrics.errors import MetricsError, QueryFailed, SourceUnreachable
from latency_tuner.core import promql, signals
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.vllm.metrics import FAMILIES, MetricType, Signal


@dataclass(frozen=True)
class PrometheusSettings:
    url: str
    bearer_token: str | None = None
    ca_file: str | None = None
    insecure_skip_verify: bool = False
    timeout_seconds: float = 10.0


class PrometheusSource:
    """A ``MetricsSource`` over a Prometheus HTTP API."""

    def __init__(self, settings: PrometheusSettings) -> None:
        self.settings = settings
        session = requests.Session()
        if settings.ca_file:
            session.verify = settings.ca_file
        headers = (
            {"Authorization": f"Bearer {settings.bearer_token}"} if settings.bearer_token else None
        )
        self._client = PrometheusConnect(
            url=settings.url.rstrip("/"),
            headers=headers,
            disable_ssl=settings.insecure_skip_verify,
            session=session,
            timeout=settings.timeout_seconds,
        )

    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        wanted = tuple(percentiles)
        return await asyncio.to_thread(self._observe, matchers, window_seconds, wanted, end)

    async def check(self) -> None:
        """Raise ``SourceUnreachable`` unless the server answers a trivial query."""
        await asyncio.to_thread(self._query, "vector(1)", None)

    # -- blocking part, in a worker thread ----------------------------------------------------

    def _observe(
        self,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: tuple[int, ...],
        end: float | None,
    ) -> ObservationResult:
        # Every query of one observation is evaluated at the same instant: left to Prometheus'
        # "now", dozens of sequential queries would each see a different window.
        end = time.time() if end is None else end
        sel = promql.selector(matchers)
        names = self._present_names(sel, end)
        window = promql.duration(window_seconds)
        results: dict[signals.SignalQuery, float | None] = {}
        for query in signals.queries_for(percentiles):
            metric = self._name_for(query.signal, names)
            if metric is None:
                results[query] = None
                continue
            variables = {"metric": metric, "selector": sel, "window": window}
            if query.quantile is not None:
                variables["quantile"] = repr(query.quantile)
            results[query] = _scalar(self._query(promql.render(query.kind.value, **variables), end))
        cache_config = self._cache_config(sel, names, end)
        return signals.assemble(results, window_seconds=window_seconds, cache_config=cache_config)

    def _present_names(self, sel: str, end: float | None) -> set[str]:
        # One query tells which generation of names the selected servers expose.
        expr = (
            f'count by (__name__) ({{__name__=~"vllm:.+",{sel}}})'
            if sel
            else ('count by (__name__) ({__name__=~"vllm:.+"})')
        )
        return {r["metric"].get("__name__", "") for r in self._query(expr, end)}

    @staticmethod
    def _name_for(signal: Signal, present: set[str]) -> str | None:
        fam = FAMILIES[signal]
        suffix = "_count" if fam.type is MetricType.HISTOGRAM else ""
        return next((n for n in fam.candidates if n + suffix in present), None)

    def _cache_config(self, sel: str, present: set[str], end: float | None) -> dict[str, str]:
        name = FAMILIES[Signal.CACHE_CONFIG].current
        if name not in present:
            return {}
        rows = self._query(promql.render("series", metric=name, selector=sel), end)
        if not rows:
            return {}
        labels: dict[str, str] = rows[0]["metric"]
        return {k: v for k, v in labels.items() if k not in signals.TARGET_LABELS}

    def _query(self, expr: str, end: float | None) -> list[dict[str, Any]]:
        params = {"time": f"{end:.3f}"} if end is not None else None
        try:
            data = self._client.custom_query(expr, params=params)
        except requests.exceptions.RequestException as exc:
            raise SourceUnreachable(
                f"Prometheus at {self.settings.url} is unreachable: {exc}"
            ) from exc
        except PrometheusApiClientException as exc:
            raise QueryFailed(f"Prometheus rejected the query {expr!r}: {exc}") from exc
        if not isinstance(data, list):
            raise MetricsError(f"unexpected answer from Prometheus for {expr!r}: {data!r}")
        return data


def _scalar(rows: list[dict[str, Any]]) -> float | None:
    """The single value of an aggregated instant vector; None for empty or NaN/Inf."""
    if not rows:
        return None
    try:
        value = float(rows[0]["value"][1])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise MetricsError(f"unexpected sample in Prometheus answer: {rows[0]!r}") from exc
    return value if math.isfinite(value) else None
