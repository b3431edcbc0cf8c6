"""Direct-scrape sources for the operator, one per LatencyTarget, each scraping its pods in
the background (the default for clusters without Prometheus)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from latency_tuner.adapters.metrics.scrape import ScrapeSource, ScrapeTarget
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.controller.ports import MetricsSource
from latency_tuner.core.cluster import PodFacts


def scrape_targets(namespace: str, pods: Sequence[PodFacts]) -> list[ScrapeTarget]:
    """Where each pod with an IP serves /metrics (its IP and the annotated or declared port)."""
    out = []
    for pod in pods:
        if pod.ip and pod.metrics_port:
            labels = {"namespace": namespace, "pod": pod.name}
            url = f"http://{pod.ip}:{pod.metrics_port}{pod.metrics_path}"
            out.append(ScrapeTarget(url, labels))
    return out


class ScrapePool:
    """Direct-scrape sources, one per LatencyTarget, each scraping in the background. The loop
    tells it where the pods are (``pods_seen``) and asks it for a source (``source``)."""

    def __init__(self, interval_seconds: float = 5.0) -> None:
        self.interval = interval_seconds
        self._sources: dict[tuple[str, str], ScrapeSource] = {}
        self._targets: dict[tuple[str, str], list[ScrapeTarget]] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._stop = asyncio.Event()

    def pods_seen(self, namespace: str, name: str, pods: Sequence[PodFacts]) -> None:
        self._targets[(namespace, name)] = scrape_targets(namespace, pods)

    async def source(self, spec: LatencyTargetSpec, namespace: str, name: str) -> MetricsSource:
        key = (namespace, name)
        if key not in self._sources:
            src = ScrapeSource(lambda: self._targets.get(key, []))
            self._sources[key] = src
            self._tasks[key] = asyncio.create_task(src.run(self.interval, self._stop))
        return self._sources[key]

    async def forget(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        source = self._sources.pop(key, None)
        if source is not None:
            await source.aclose()
        self._targets.pop(key, None)

    async def close(self) -> None:
        self._stop.set()
        for namespace, name in list(self._sources):
            await self.forget(namespace, name)
