"""The /metrics of a whole fleet of simulated vLLM pods, one scrape target a namespace.

Each Deployment's current pod exposes every family the operator reads (``vllm.metrics``,
current names, vLLM's own bucket boundaries: 178 series a pod) under the labels a Kubernetes
scrape would attach (``namespace``, ``pod``); Prometheus keeps them with ``honor_labels``.
Requests finish at ``RATE`` per second; a healthy Deployment answers TTFT 0.1 s, a breached one
2 s with requests queueing (waiting 12, running at ``--max-num-seqs``), so the operator's
diagnosis says Queueing and its first trial raises ``max-num-seqs``. Counters restart at zero
for a new pod, as a new vLLM process's would. One scrape renders the text from two numbers per
pod (healthy and slow requests so far); no prometheus_client registry per pod.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from latency_tuner.vllm.metrics import FAMILIES, MetricType, Signal

RATE = 20.0  # finished requests per second per pod
# (healthy, breached) per-request values of each histogram.
HISTOGRAMS = {
    Signal.TTFT: (0.1, 2.0),
    Signal.E2E: (2.1, 4.0),
    Signal.ITL: (0.02, 0.02),
    Signal.TPOT: (0.02, 0.02),
    Signal.QUEUE_TIME: (0.01, 1.4),
    Signal.PREFILL_TIME: (0.05, 0.05),
    Signal.DECODE_TIME: (1.5, 1.5),
}
PER_REQUEST = {  # counters per finished request
    Signal.PROMPT_TOKENS: 512.0,
    Signal.GENERATION_TOKENS: 128.0,
    Signal.REQUEST_SUCCESS: 1.0,
}
GAUGES = {  # (healthy, breached)
    Signal.REQUESTS_RUNNING: (16.0, 16.0),
    Signal.REQUESTS_WAITING: (0.0, 12.0),
    Signal.KV_CACHE_USAGE: (0.5, 0.9),
}

# A series of a pod: (line up to the value, per healthy request, per slow request) or, for a
# gauge, (line, healthy value, breached value) with ``gauge`` set.
_Series = tuple[str, float, float, bool]


def _series(namespace: str, pod: str) -> list[_Series]:
    labels = f'namespace="{namespace}",pod="{pod}",model_name="m",engine="0"'
    out: list[_Series] = []
    for signal, (healthy, slow) in HISTOGRAMS.items():
        fam = FAMILIES[signal]
        assert fam.type is MetricType.HISTOGRAM
        assert fam.buckets is not None
        for le in (*fam.buckets, float("inf")):
            text = "+Inf" if le == float("inf") else repr(float(le))
            line = f'{fam.current}_bucket{{{labels},le="{text}"}} '
            out.append((line, float(healthy <= le), float(slow <= le), False))
        out.append((f"{fam.current}_sum{{{labels}}} ", healthy, slow, False))
        out.append((f"{fam.current}_count{{{labels}}} ", 1.0, 1.0, False))
    for signal, per in PER_REQUEST.items():
        out.append((f"{FAMILIES[signal].current}{{{labels}}} ", per, per, False))
    for signal, (healthy, slow) in GAUGES.items():
        out.append((f"{FAMILIES[signal].current}{{{labels}}} ", healthy, slow, True))
    config = FAMILIES[Signal.CACHE_CONFIG].current
    info = 'block_size="16",cache_dtype="auto",enable_prefix_caching="False",num_gpu_blocks="4096"'
    out.append((f"{config}{{{labels},{info}}} ", 1.0, 1.0, True))
    return out


class FleetMetrics:
    """The fleet's exposition text; ``pods`` says each Deployment's current pod."""

    def __init__(
        self,
        namespaces: Mapping[str, str],
        pods: Mapping[str, str],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.namespaces = namespaces  # Deployment -> its namespace
        self.pods = pods  # Deployment -> current pod (read at each scrape)
        self.breached: set[str] = set()
        self._clock = clock
        # Deployment -> (pod, its series, healthy requests, slow requests, last scrape)
        self._state: dict[str, tuple[str, list[_Series], float, float, float]] = {}

    def render(self, namespace: str | None = None) -> bytes:
        """The exposition of ``namespace``'s pods (every pod's when None)."""
        now = self._clock()
        chunks: list[str] = []
        for deployment, pod in list(self.pods.items()):
            if namespace is not None and self.namespaces[deployment] != namespace:
                continue
            state = self._state.get(deployment)
            if state is None or state[0] != pod:
                state = (pod, _series(self.namespaces[deployment], pod), 0.0, 0.0, now)
            _, series, healthy, slow, last = state
            slow_now = deployment in self.breached
            finished = RATE * max(0.0, now - last)
            if slow_now:
                slow += finished
            else:
                healthy += finished
            self._state[deployment] = (pod, series, healthy, slow, now)
            for line, h, s, gauge in series:
                value = (s if slow_now else h) if gauge else h * healthy + s * slow
                chunks.append(f"{line}{value}\n")
        return "".join(chunks).encode()
