"""The operator's own Prometheus, asked once per aggregate for every target at a time.

``BatchedPrometheus`` wraps the ``PrometheusSource`` of the Prometheus the operator is
configured with. ``observe_recent`` (the latest window of a target at rest or observing) joins
a batch: one evaluation instant, one grouped query per aggregate (``grouped``) covering every
namespace whose targets asked lately, split per target in the process. A batch whose instant is
at most ``max_age`` before a request's end answers it; otherwise a new one starts at that end,
and requests arriving in the next ``linger`` seconds join it. So the queries per reconcile cycle
grow with the aggregates and with the cycle over ``max_age``, not with the targets.

``observe`` (a window with an end of its own: a trial's, a baseline's) is passed to the
per-target source unchanged. Sources a LatencyTarget names itself never come here: they stay
per target, with their own pool and no token (see ``handlers``); a batch never crosses sources.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from latency_tuner.adapters.metrics import grouped
from latency_tuner.adapters.metrics.prometheus import PrometheusSource, Query
from latency_tuner.core import promql
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.vllm.metrics import FAMILIES, Signal

# A namespace or a label no target asked for in this long stops widening new batches.
FORGET_AFTER_SECONDS = 600.0


@dataclass
class _Batch:
    window: float
    instant: float
    namespaces: set[str]
    labels: set[str]
    created: float
    sealed: bool = False
    result: asyncio.Future[grouped.Answer] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def covers(self, namespace: str, labels: set[str]) -> bool:
        return namespace in self.namespaces and labels <= self.labels


class BatchedPrometheus:
    """A ``MetricsSource`` (and ``RecentMetricsSource``) over one Prometheus for many targets."""

    def __init__(
        self,
        source: PrometheusSource,
        *,
        max_age: float,
        linger: float = 0.05,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.max_age = max_age
        self.linger = linger
        self._clock = clock
        self._batches: list[_Batch] = []
        self._namespaces: dict[str, float] = {}  # last asked for
        self._labels: dict[str, float] = {}
        self._sending: set[asyncio.Task[None]] = set()  # held so none is collected mid-way
        self.batches_sent = 0

    @property
    def queries_sent(self) -> int:
        return self.source.queries_sent

    def close(self) -> None:
        self.source.close()

    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        """A window of its own end: asked for this target alone."""
        return await self.source.observe(
            matchers=matchers, window_seconds=window_seconds, percentiles=percentiles, end=end
        )

    async def observe_recent(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        """The window ending at the instant of a batch at most ``max_age`` before ``end``."""
        namespace = next(
            (m.value for m in matchers if m.label == "namespace" and m.op == "="), None
        )
        try:
            promql.selector(matchers)  # a label name no query may carry must not fail the batch
        except promql.PromQLError:
            namespace = None
        if namespace is None:  # nothing to batch by, or a selector of its own to fail: alone
            return await self.observe(
                matchers=matchers, window_seconds=window_seconds, percentiles=percentiles, end=end
            )
        now = self._clock()
        end = now if end is None else end
        labels = set(grouped.group_labels([matchers]))
        self._namespaces[namespace] = now
        for label in labels:
            self._labels[label] = now
        batch = self._join(window_seconds, end, namespace, labels)
        if batch is None:
            batch = self._start(window_seconds, end, now)
        answer = await asyncio.shield(batch.result)
        return grouped.split(
            answer, matchers, window_seconds=window_seconds, percentiles=percentiles
        )

    def _join(self, window: float, end: float, namespace: str, labels: set[str]) -> _Batch | None:
        for batch in reversed(self._batches):
            if batch.window != window or not end - self.max_age <= batch.instant <= end:
                continue
            if batch.covers(namespace, labels):
                return batch
            if not batch.sealed:
                batch.namespaces.add(namespace)
                batch.labels |= labels
                return batch
        return None

    def _start(self, window: float, end: float, now: float) -> _Batch:
        horizon = now - FORGET_AFTER_SECONDS
        for known in (self._namespaces, self._labels):
            for key in [k for k, seen in known.items() if seen < horizon]:
                del known[key]
        # Done batches too old to answer anyone are dropped (their answers can be large).
        self._batches = [
            b for b in self._batches if not b.result.done() or b.created >= now - self.max_age
        ]
        batch = _Batch(window, end, set(self._namespaces), set(self._labels), created=now)
        self._batches.append(batch)
        self._sending.add(task := asyncio.create_task(self._send(batch)))
        task.add_done_callback(self._sending.discard)  # failures land in batch.result
        return batch

    async def _send(self, batch: _Batch) -> None:
        await asyncio.sleep(self.linger)
        batch.sealed = True
        self.batches_sent += 1
        labels = grouped.group_labels([[LabelMatcher(lab, "=", "") for lab in batch.labels]])
        names = sorted(batch.namespaces)
        scope = (
            LabelMatcher("namespace", "=", names[0])
            if len(names) == 1
            else LabelMatcher("namespace", "=~", "|".join(promql.escape_regex(n) for n in names))
        )
        selector = promql.selector([scope])

        def work(query: Query) -> grouped.Answer:
            answer = grouped.Answer(labels)
            expr = promql.render(
                "grouped_names",
                by=",".join(["__name__", *labels]),
                names="|".join(grouped.wanted_names()),
                selector=selector,
            )
            answer.add_names(query(expr, batch.instant))
            for part in grouped.parts(answer):
                expr = grouped.render(part, labels=labels, selector=selector, window=batch.window)
                answer.add(part, query(expr, batch.instant))
            config = FAMILIES[Signal.CACHE_CONFIG].current
            if any(config in names for names in answer.names.values()):
                expr = promql.render("series", metric=config, selector=selector)
                answer.add_configs(query(expr, batch.instant))
            return answer

        try:
            batch.result.set_result(await self.source.evaluate(work))
            # Requests end "now": the newest answer serves whoever an older one would have.
            self._batches = [
                b
                for b in self._batches
                if b is batch or b.window != batch.window or b.instant > batch.instant
            ]
        except Exception as exc:  # every waiter gets it; the next request starts a new batch
            batch.result.set_exception(exc)
            with contextlib.suppress(ValueError):
                self._batches.remove(batch)
