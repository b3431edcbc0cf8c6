"""The operator's own Prometheus, asked once per aggregate for every target at a time.

``BatchedPrometheus`` wraps the ``PrometheusSource`` of the Prometheus the operator is
configured with. ``observe_recent`` (the latest window of a target at rest or observing) joins
a batch: one evaluation instant, one grouped query per aggregate (``grouped``) covering every
namespace whose targets asked lately, split per target in the process. A batch whose instant is
at most ``max_age`` before a request's end answers it; otherwise a new one starts at that end,
and requests arriving in the next ``linger`` seconds join it. So the queries per reconcile cycle
grow with the aggregates and with the cycle over ``max_age``, not with the targets -- up to
``max_targets`` targets a query: a batch over more is asked in chunks of whole namespaces (a
namespace is never split), each with its own deadline, so one query's cost stays bounded and a
query that times out fails only its own chunk's targets.

``observe`` (a window with an end of its own: a trial's, a baseline's) is passed to the
per-target source unchanged. Sources a LatencyTarget names itself never come here: they stay
per target, with their own pool and no token (see ``handlers``); a batch never crosses sources.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from latency_tuner.adapters.metrics import grouped
from latency_tuner.adapters.metrics.prometheus import PrometheusSource, Query
from latency_tuner.core import promql
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.vllm.metrics import FAMILIES, Signal

# A namespace, target or label no one asked for in this long stops widening new batches.
FORGET_AFTER_SECONDS = 600.0
# Targets one grouped query may cover (counted per namespace): at 2,500 a query's thousands of
# series outlasted a busy Prometheus' timeout and failed every target of the shard at once.
MAX_TARGETS_PER_QUERY = 500


@dataclass
class _Batch:
    window: float
    instant: float
    namespaces: set[str]
    labels: set[str]
    created: float
    sealed: bool = False
    # Per namespace, the answer of the chunk that asked for it.
    results: dict[str, asyncio.Future[grouped.Answer]] = field(default_factory=dict)

    def result(self, namespace: str) -> asyncio.Future[grouped.Answer]:
        if namespace not in self.results:
            self.results[namespace] = asyncio.get_running_loop().create_future()
        return self.results[namespace]

    def covers(self, namespace: str, labels: set[str]) -> bool:
        failed = namespace in self.results and self._failed(self.results[namespace])
        return namespace in self.namespaces and labels <= self.labels and not failed

    @property
    def done(self) -> bool:
        return self.sealed and all(f.done() for f in self.results.values())

    @property
    def answered(self) -> bool:
        """Done, and no chunk failed."""
        return self.done and not any(self._failed(f) for f in self.results.values())

    @staticmethod
    def _failed(future: asyncio.Future[grouped.Answer]) -> bool:
        return future.done() and future.exception() is not None


class BatchedPrometheus:
    """A ``MetricsSource`` (and ``RecentMetricsSource``) over one Prometheus for many targets."""

    def __init__(
        self,
        source: PrometheusSource,
        *,
        max_age: float,
        linger: float = 0.05,
        max_targets: int = MAX_TARGETS_PER_QUERY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.max_age = max_age
        self.linger = linger
        self.max_targets = max_targets
        self._clock = clock
        self._batches: list[_Batch] = []
        self._namespaces: dict[str, float] = {}  # last asked for
        self._targets: dict[str, dict[str, float]] = {}  # namespace -> selector -> last asked
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
            # A label name no query may carry must not fail the batch.
            target = promql.selector(matchers)
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
        self._targets.setdefault(namespace, {})[target] = now
        for label in labels:
            self._labels[label] = now
        batch = self._join(window_seconds, end, namespace, labels)
        if batch is None:
            batch = self._start(window_seconds, end, now)
        answer = await asyncio.shield(batch.result(namespace))
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
        for known in (self._namespaces, self._labels, *self._targets.values()):
            for key in [k for k, seen in known.items() if seen < horizon]:
                del known[key]
        for namespace in [n for n, targets in self._targets.items() if not targets]:
            del self._targets[namespace]
        # Done batches too old to answer anyone are dropped (their answers can be large).
        self._batches = [b for b in self._batches if not b.done or b.created >= now - self.max_age]
        batch = _Batch(window, end, set(self._namespaces), set(self._labels), created=now)
        self._batches.append(batch)
        self._sending.add(task := asyncio.create_task(self._send(batch)))
        task.add_done_callback(self._sending.discard)  # failures land in the chunks' results
        return batch

    def chunks(self, namespaces: Iterable[str]) -> list[list[str]]:
        """Whole namespaces, in name order, packed so that a chunk covers at most
        ``max_targets`` targets (a namespace with more is a chunk of its own)."""
        out: list[list[str]] = []
        size = 0
        for name in sorted(namespaces):
            weight = max(1, len(self._targets.get(name, ())))
            if not out or size + weight > self.max_targets:
                out.append([])
                size = 0
            out[-1].append(name)
            size += weight
        return out

    async def _send(self, batch: _Batch) -> None:
        await asyncio.sleep(self.linger)
        batch.sealed = True
        self.batches_sent += 1
        labels = grouped.group_labels([[LabelMatcher(lab, "=", "") for lab in batch.labels]])
        await asyncio.gather(
            *(self._ask(batch, chunk, labels) for chunk in self.chunks(batch.namespaces))
        )
        if batch.answered:
            # Requests end "now": the newest answer serves whoever an older one would have.
            self._batches = [
                b
                for b in self._batches
                if b is batch or b.window != batch.window or b.instant > batch.instant
            ]

    async def _ask(self, batch: _Batch, names: list[str], labels: tuple[str, ...]) -> None:
        """One chunk's grouped queries; its answer (or error) goes to its namespaces' waiters."""
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

        futures = [batch.result(name) for name in names]
        try:
            answer = await self.source.evaluate(work)
        except Exception as exc:  # every waiter of the chunk gets it; the next request re-asks
            for future in futures:
                future.set_exception(exc)
                future.exception()  # retrieved: a namespace no one waits for is not an error
            return
        for future in futures:
            future.set_result(answer)
