"""The Prometheus backend: named PromQL templates through prometheus-api-client.

prometheus-api-client is a blocking (requests) client: every call runs in a worker thread so the
operator's event loop never waits on the network. One ``observe`` first asks which vLLM metric
names the selected series carry (current or pre-0.11 names), then evaluates every aggregate of
``core.signals`` with that name.

A Prometheus may be slow, down or hostile (a tenant may name its own), and must never delay
another target: each source has its own small thread pool (never asyncio's shared default),
at most ``concurrency`` observations in flight (more wait, each up to its own deadline),
one total deadline per observation that every query's timeout is cut to, no retries (the next
reconcile is the retry), and a cap on the bytes of any answer.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from latency_tuner.adapters.metrics.errors import QueryFailed, SourceUnreachable
from latency_tuner.api.durations import format_duration
from latency_tuner.core import promql, signals
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.vllm.metrics import FAMILIES, MetricType, Signal

_T = TypeVar("_T")
# One instant query: (expression, evaluation time) -> the rows of its instant vector.
Query = Callable[[str, float], list[dict[str, Any]]]


@dataclass(frozen=True)
class PrometheusSettings:
    url: str
    bearer_token: str | None = None
    ca_file: str | None = None
    insecure_skip_verify: bool = False
    timeout_seconds: float = 10.0  # one query
    deadline_seconds: float = 30.0  # one whole observation (every query of it)
    concurrency: int = 4  # observations in flight at once; more wait for a slot
    max_response_bytes: int = 4 * 1024 * 1024  # our aggregates answer in a few hundred bytes


class ResponseTooLarge(requests.exceptions.RequestException):
    """The answer exceeded ``max_response_bytes``."""


class _DeadlinePassed(requests.exceptions.RequestException):
    """The observation's deadline passed before this query could start."""


class _CappedAdapter(HTTPAdapter):
    """Reads at most ``limit`` bytes of a body: a hostile server cannot fill our memory."""

    def __init__(self, limit: int) -> None:
        super().__init__(max_retries=Retry(total=0, read=False, redirect=False))
        self.limit = limit

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs["stream"] = True
        timeout = kwargs.get("timeout")
        # requests' timeout bounds each socket read, not the whole body: a server trickling
        # bytes would hold the thread for ever. Bound the whole read too.
        give_up = time.monotonic() + (timeout if isinstance(timeout, int | float) else 60.0)
        response = super().send(request, **kwargs)
        chunks: list[bytes] = []
        size = 0
        try:
            while chunk := response.raw.read1(65536, decode_content=True):
                size += len(chunk)
                if size > self.limit:
                    raise ResponseTooLarge(f"the answer exceeded {self.limit} bytes")
                if time.monotonic() > give_up:
                    raise requests.exceptions.ReadTimeout("the answer took too long to arrive")
                chunks.append(chunk)
        finally:
            response.close()
        response._content = b"".join(chunks)  # what requests would have read itself, bounded
        response._content_consumed = True
        return response


class PrometheusSource:
    """A ``MetricsSource`` over a Prometheus HTTP API."""

    def __init__(self, settings: PrometheusSettings) -> None:
        self.settings = settings
        url = settings.url.rstrip("/")
        session = requests.Session()
        if settings.ca_file:
            session.verify = settings.ca_file
        headers = (
            {"Authorization": f"Bearer {settings.bearer_token}"} if settings.bearer_token else None
        )
        self._client = PrometheusConnect(
            url=url,
            headers=headers,
            disable_ssl=settings.insecure_skip_verify,
            session=session,
            timeout=settings.timeout_seconds,
        )
        # Replaces the client's retrying adapter for this URL (same prefix): no retry storms.
        session.mount(url, _CappedAdapter(settings.max_response_bytes))
        session.max_redirects = 0  # a redirect could carry our token elsewhere
        self._pool = ThreadPoolExecutor(
            max_workers=settings.concurrency, thread_name_prefix="prometheus"
        )
        # Counted until the worker thread is really done (not when we stop waiting for it), so
        # a server that holds threads makes further observations fail at once, not pile up.
        self._in_flight = 0
        self.queries_sent = 0  # every PromQL query sent, for the operator's metrics and benchmarks
        self._lock = threading.Lock()
        self._slots = asyncio.Semaphore(settings.concurrency)

    def close(self) -> None:
        """Stop the worker threads (a query in progress finishes at its own timeout)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _run(self, job: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking job on this source's own pool, within the observation deadline.

        Observations queue for one of ``concurrency`` slots, each waiting at most until its own
        deadline. A slot is freed when its caller gives up, but the thread it started is counted
        until it really ends: when every thread is still held by a server that stopped
        answering, a new observation fails at once instead of queueing behind them.
        """
        deadline = time.monotonic() + self.settings.deadline_seconds
        try:
            async with asyncio.timeout(self.settings.deadline_seconds + 1), self._slots:
                with self._lock:
                    if self._in_flight >= self.settings.concurrency:
                        raise SourceUnreachable(
                            f"Prometheus at {self.settings.url} still holds "
                            f"{self._in_flight} earlier queries: skipped"
                        )
                    self._in_flight += 1
                future = self._pool.submit(job, *args, deadline)
                future.add_done_callback(self._finished)
                return await asyncio.wrap_future(future)
        except TimeoutError as exc:
            raise SourceUnreachable(
                f"Prometheus at {self.settings.url} did not answer within "
                f"{format_duration(self.settings.deadline_seconds)}"
            ) from exc

    def _finished(self, _: object) -> None:
        with self._lock:
            self._in_flight -= 1

    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        wanted = tuple(percentiles)
        result: ObservationResult = await self._run(
            self._observe, matchers, window_seconds, wanted, end
        )
        return result

    async def evaluate(self, work: Callable[[Query], _T]) -> _T:
        """Run ``work`` on this source's pool, under its slots and one observation deadline;
        ``work`` gets a function that sends one instant query (expression, time) and returns
        its rows (raising ``SourceUnreachable`` or ``QueryFailed``)."""

        def job(deadline: float) -> _T:
            return work(lambda expr, end: self._query(expr, end, deadline))

        result: _T = await self._run(job)
        return result

    async def check(self) -> None:
        """Raise ``SourceUnreachable`` unless the server answers a trivial query."""
        await self._run(self._query, "vector(1)", None)

    # -- blocking part, in a worker thread ----------------------------------------------------

    def _observe(
        self,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: tuple[int, ...],
        end: float | None,
        deadline: float,
    ) -> ObservationResult:
        # Every query of one observation is evaluated at the same instant: left to Prometheus'
        # "now", dozens of sequential queries would each see a different window.
        end = time.time() if end is None else end
        sel = promql.selector(matchers)
        names = self._present_names(sel, end, deadline)
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
            expr = promql.render(query.kind.value, **variables)
            results[query] = _scalar(self._query(expr, end, deadline))
        cache_config = self._cache_config(sel, names, end, deadline)
        return signals.assemble(results, window_seconds=window_seconds, cache_config=cache_config)

    def _present_names(self, sel: str, end: float | None, deadline: float) -> set[str]:
        # One query tells which generation of names the selected servers expose.
        expr = (
            f'count by (__name__) ({{__name__=~"vllm:.+",{sel}}})'
            if sel
            else ('count by (__name__) ({__name__=~"vllm:.+"})')
        )
        return {str(r["metric"].get("__name__", "")) for r in self._query(expr, end, deadline)}

    @staticmethod
    def _name_for(signal: Signal, present: set[str]) -> str | None:
        fam = FAMILIES[signal]
        suffix = "_count" if fam.type is MetricType.HISTOGRAM else ""
        return next((n for n in fam.candidates if n + suffix in present), None)

    def _cache_config(
        self, sel: str, present: set[str], end: float | None, deadline: float
    ) -> dict[str, str]:
        name = FAMILIES[Signal.CACHE_CONFIG].current
        if name not in present:
            return {}
        rows = self._query(promql.render("series", metric=name, selector=sel), end, deadline)
        if not rows:
            return {}
        labels: Mapping[str, Any] = rows[0]["metric"]
        return {str(k): str(v) for k, v in labels.items() if k not in signals.TARGET_LABELS}

    def _query(self, expr: str, end: float | None, deadline: float) -> list[dict[str, Any]]:
        params = {"time": f"{end:.3f}"} if end is not None else None
        with self._lock:
            self.queries_sent += 1
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _DeadlinePassed(
                    f"deadline of {format_duration(self.settings.deadline_seconds)} passed"
                )
            timeout = min(self.settings.timeout_seconds, remaining)
            data = self._client.custom_query(expr, params=params, timeout=timeout)
        except (requests.exceptions.JSONDecodeError, ValueError) as exc:
            # It answered, but not in Prometheus' JSON: a wrong URL (a web page, a proxy).
            raise QueryFailed(
                f"{self.settings.url} answered with something that is not Prometheus' JSON API: "
                "is it the URL of a Prometheus server?"
            ) from exc
        except requests.exceptions.RequestException as exc:
            raise SourceUnreachable(
                f"Prometheus at {self.settings.url} is unreachable: {_why(exc)}"
            ) from exc
        except (PrometheusApiClientException, KeyError, TypeError) as exc:
            raise QueryFailed(
                f"Prometheus at {self.settings.url} answered with an error: {_refusal(str(exc))}"
            ) from exc
        if not isinstance(data, list) or not all(
            isinstance(r, Mapping) and isinstance(r.get("metric"), Mapping) for r in data
        ):
            raise QueryFailed(
                f"Prometheus at {self.settings.url} answered {expr!r} with something that is not "
                f"an instant vector: {_short(repr(data))}"
            )
        return data


def _refusal(text: str) -> str:
    """One line from prometheus-api-client's ``HTTP Status Code 404 (b'<html>...')``: the
    status and Prometheus' own ``error`` field when there is one, never a page's markup."""
    code = re.match(r"HTTP Status Code (\d+)", text)
    if code is None:
        return _short(" ".join(text.split()))
    status = int(code.group(1))
    body = text[code.end() :]
    error = re.search(r'"error"\s*:\s*"((?:[^"\\]|\\.)*)"', body)
    if error is not None:
        return f"HTTP {status}: {_short(error.group(1))}"
    hint = {
        401: "unauthorized (bearer token missing or wrong)",
        403: "forbidden (the token may not query)",
        404: "not found (is the URL a Prometheus server, with its path prefix?)",
        503: "unavailable (Prometheus starting or stopping, or a proxy with no server behind it)",
    }.get(status, "not a Prometheus error answer")
    return f"HTTP {status}: {hint}"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _why(exc: requests.exceptions.RequestException) -> str:
    """One line a person can act on, instead of urllib3's nested repr."""
    if isinstance(exc, ResponseTooLarge | _DeadlinePassed):
        return str(exc)
    if isinstance(exc, requests.exceptions.Timeout):
        return "timed out"
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS handshake failed (wrong CA or certificate)"
    if isinstance(exc, requests.exceptions.TooManyRedirects):
        return "it redirected (redirects are not followed)"
    if isinstance(exc, requests.exceptions.ConnectionError):
        text = str(exc)
        for needle, why in (
            ("Connection refused", "connection refused"),
            ("Name or service not known", "host name not found"),
            ("nodename nor servname", "host name not found"),
            ("Temporary failure in name resolution", "host name not resolved"),
            ("Connection reset", "connection reset"),
            ("Network is unreachable", "network unreachable"),
        ):
            if needle in text:
                return why
        return "connection failed"
    return type(exc).__name__


def _scalar(rows: list[dict[str, Any]]) -> float | None:
    """The single value of an aggregated instant vector; None for empty or NaN/Inf."""
    if not rows:
        return None
    try:
        value = float(rows[0]["value"][1])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise QueryFailed(
            f"unexpected sample in Prometheus answer: {_short(repr(rows[0]))}"
        ) from exc
    return value if math.isfinite(value) else None
