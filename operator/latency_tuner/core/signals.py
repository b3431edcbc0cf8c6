"""From metric series to an Observation: which aggregates to ask for and how to assemble them.

Both metrics sources share this: ``QUERIES`` lists the aggregates an Observation needs (each a
``SignalQuery``: a kind of aggregate over one signal); a source evaluates them (Prometheus with
the PromQL templates of ``core.promql``, the direct scrape and the benchmarks with
``evaluate_on_series`` over raw samples, using Prometheus' own arithmetic from
``core.prommath``) and ``assemble`` turns the answers into an ``Observation`` or ``NoData``.

Three readings happen here because both sources need them: under speculative decoding (its
draft counters exist) ITL is judged on the per-request time per output token, since the
inter-token histogram takes one sample per streamed chunk of several tokens; KV capacity comes
from ``cache_config_info``'s labels (``vllm.metrics.kv_capacity``, current names first); and a
quantile inside its histogram's lowest bucket is flagged as interpolated (``lowest_bucket_
warning`` says so when a target, or the diagnosis of a metric with a target, rests on one).
Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from latency_tuner.api.spec import Objectives
from latency_tuner.core import prommath
from latency_tuner.core.observation import BASE_PERCENTILES, NoData, Observation, ObservationResult
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.vllm.metrics import FAMILIES, MetricType, Signal, kv_capacity, lowest_bucket


class QueryKind(StrEnum):
    """An aggregate; the value is the name of its PromQL template."""

    QUANTILE = "histogram_quantile"
    MEAN = "histogram_mean"
    COUNT_INCREASE = "histogram_count_increase"
    COUNT_RATE = "histogram_count_rate"
    COUNTER_INCREASE = "counter_increase"
    COUNTER_RATE = "counter_rate"
    GAUGE_SUM_AVG = "gauge_sum_avg"
    GAUGE_SUM_MAX = "gauge_sum_max"
    GAUGE_AVG_AVG = "gauge_avg_avg"
    GAUGE_MAX_MAX = "gauge_max_max"
    GAUGE_SUM_DELTA = "gauge_sum_delta"
    PODS = "pods"


@dataclass(frozen=True)
class SignalQuery:
    kind: QueryKind
    signal: Signal
    quantile: float | None = None


def _q(kind: QueryKind, signal: Signal, quantile: float | None = None) -> SignalQuery:
    return SignalQuery(kind, signal, quantile)


REQUESTS = _q(QueryKind.COUNT_INCREASE, Signal.E2E)
REQUEST_RATE = _q(QueryKind.COUNT_RATE, Signal.E2E)
PODS = _q(QueryKind.PODS, Signal.E2E)


def queries_for(percentiles: Iterable[int] = ()) -> tuple[SignalQuery, ...]:
    """Every aggregate an Observation needs, for the base and the objectives' percentiles."""
    wanted = sorted(set(BASE_PERCENTILES) | set(percentiles))
    quantiles = [
        _q(QueryKind.QUANTILE, s, p / 100)
        for s in (Signal.TTFT, Signal.ITL, Signal.TPOT, Signal.E2E)
        for p in wanted
    ]  # fmt: skip
    means = [
        _q(QueryKind.MEAN, s)
        for s in (Signal.TTFT, Signal.ITL, Signal.TPOT, Signal.QUEUE_TIME, Signal.PREFILL_TIME,
                  Signal.DECODE_TIME)
    ]  # fmt: skip
    counters = [
        _q(QueryKind.COUNTER_RATE, s)
        for s in (Signal.PROMPT_TOKENS, Signal.GENERATION_TOKENS, Signal.PREFIX_CACHE_QUERIES,
                  Signal.PREFIX_CACHE_HITS, Signal.SPEC_DRAFT_TOKENS, Signal.SPEC_ACCEPTED_TOKENS)
    ]  # fmt: skip
    gauges = [
        _q(QueryKind.GAUGE_SUM_AVG, Signal.REQUESTS_RUNNING),
        _q(QueryKind.GAUGE_SUM_MAX, Signal.REQUESTS_RUNNING),
        _q(QueryKind.GAUGE_SUM_AVG, Signal.REQUESTS_WAITING),
        _q(QueryKind.GAUGE_SUM_MAX, Signal.REQUESTS_WAITING),
        _q(QueryKind.GAUGE_SUM_DELTA, Signal.REQUESTS_RUNNING),
        _q(QueryKind.GAUGE_SUM_DELTA, Signal.REQUESTS_WAITING),
        _q(QueryKind.GAUGE_AVG_AVG, Signal.KV_CACHE_USAGE),
        _q(QueryKind.GAUGE_MAX_MAX, Signal.KV_CACHE_USAGE),
    ]
    return (
        REQUESTS, REQUEST_RATE, PODS, *quantiles, *means, *counters, *gauges,
        _q(QueryKind.COUNTER_INCREASE, Signal.PREEMPTIONS),
    )  # fmt: skip


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def assemble(
    results: Mapping[SignalQuery, float | None],
    *,
    window_seconds: float,
    cache_config: Mapping[str, str] | None = None,
) -> ObservationResult:
    """Build the Observation from the evaluated aggregates (missing keys count as no value)."""

    def get(query: SignalQuery) -> float | None:
        return results.get(query)

    requests = get(REQUESTS)
    if requests is None:
        return NoData(
            reason="no vLLM request series match the selector", window_seconds=window_seconds
        )
    finished = round(requests)
    if finished <= 0:
        return NoData(
            reason="no requests finished in the window",
            window_seconds=window_seconds,
            running_delta=get(_q(QueryKind.GAUGE_SUM_DELTA, Signal.REQUESTS_RUNNING)),
            waiting_delta=get(_q(QueryKind.GAUGE_SUM_DELTA, Signal.REQUESTS_WAITING)),
            waiting_mean=get(_q(QueryKind.GAUGE_SUM_AVG, Signal.REQUESTS_WAITING)),
        )

    def quantiles(signal: Signal) -> dict[int, float]:
        out: dict[int, float] = {}
        for q, v in results.items():
            if q.kind is QueryKind.QUANTILE and q.signal is signal and v is not None:
                assert q.quantile is not None
                out[round(q.quantile * 100)] = v
        return out

    def mean(signal: Signal) -> float | None:
        return get(_q(QueryKind.MEAN, signal))

    def rate(signal: Signal) -> float | None:
        return get(_q(QueryKind.COUNTER_RATE, signal))

    request_rate = get(REQUEST_RATE) or 0.0
    itl, itl_mean, tpot = quantiles(Signal.ITL), mean(Signal.ITL), quantiles(Signal.TPOT)
    # The draft counters exist only with a speculative config: then judge ITL per token.
    speculative = rate(Signal.SPEC_DRAFT_TOKENS) is not None
    per_token = speculative and bool(tpot)
    judged = tpot if per_token else itl
    judged_signal = Signal.TPOT if per_token else Signal.ITL
    capacity = kv_capacity(dict(cache_config or {}))
    coarse = {
        **_inside_lowest_bucket("ttft", Signal.TTFT, quantiles(Signal.TTFT)),
        **_inside_lowest_bucket("itl", judged_signal, judged),
        **_inside_lowest_bucket("e2e", Signal.E2E, quantiles(Signal.E2E)),
    }
    return Observation(
        window_seconds=window_seconds,
        requests=finished,
        pods=round(get(PODS) or 1),
        ttft=quantiles(Signal.TTFT),
        itl=judged,
        e2e=quantiles(Signal.E2E),
        ttft_mean=mean(Signal.TTFT),
        itl_mean=mean(Signal.TPOT) if per_token else itl_mean,
        itl_source="request_time_per_output_token" if per_token else "inter_token_latency",
        itl_per_chunk=itl if per_token else {},
        tpot=tpot,
        tpot_mean=mean(Signal.TPOT),
        kv_capacity_tokens=capacity.tokens if capacity else None,
        kv_max_concurrency=capacity.max_concurrency if capacity else None,
        lowest_bucket_quantiles=coarse,
        queue_time_mean=mean(Signal.QUEUE_TIME),
        prefill_time_mean=mean(Signal.PREFILL_TIME),
        decode_time_mean=mean(Signal.DECODE_TIME),
        request_rate=request_rate,
        prompt_tokens_mean=_ratio(rate(Signal.PROMPT_TOKENS), request_rate),
        generation_tokens_mean=_ratio(rate(Signal.GENERATION_TOKENS), request_rate),
        running_mean=get(_q(QueryKind.GAUGE_SUM_AVG, Signal.REQUESTS_RUNNING)),
        running_max=get(_q(QueryKind.GAUGE_SUM_MAX, Signal.REQUESTS_RUNNING)),
        waiting_mean=get(_q(QueryKind.GAUGE_SUM_AVG, Signal.REQUESTS_WAITING)),
        waiting_max=get(_q(QueryKind.GAUGE_SUM_MAX, Signal.REQUESTS_WAITING)),
        running_delta=get(_q(QueryKind.GAUGE_SUM_DELTA, Signal.REQUESTS_RUNNING)),
        waiting_delta=get(_q(QueryKind.GAUGE_SUM_DELTA, Signal.REQUESTS_WAITING)),
        kv_cache_usage_mean=get(_q(QueryKind.GAUGE_AVG_AVG, Signal.KV_CACHE_USAGE)),
        kv_cache_usage_max=get(_q(QueryKind.GAUGE_MAX_MAX, Signal.KV_CACHE_USAGE)),
        prefix_cache_hit_rate=_ratio(
            rate(Signal.PREFIX_CACHE_HITS), rate(Signal.PREFIX_CACHE_QUERIES)
        ),
        preemptions=get(_q(QueryKind.COUNTER_INCREASE, Signal.PREEMPTIONS)),
        spec_acceptance_rate=_ratio(
            rate(Signal.SPEC_ACCEPTED_TOKENS), rate(Signal.SPEC_DRAFT_TOKENS)
        ),
        cache_config=dict(cache_config or {}),
    )


def lowest_bucket_warning(
    observation: Observation, objectives: Objectives, *, any_percentile: bool = False
) -> str | None:
    """The warning when an objective's quantile (``any_percentile``: any quantile of a metric
    that has an objective, as a diagnosis reads p50 and p99 too) lies inside its histogram's
    lowest bucket, where Prometheus interpolates; None when none does."""
    percentiles = {
        name: goal.percentile
        for name, goal in (("ttft", objectives.ttft), ("itl", objectives.itl),
                           ("e2e", objectives.e2e))
        if goal is not None
    }  # fmt: skip
    keys = [
        key
        for key in observation.lowest_bucket_quantiles
        if (metric := key.rsplit("_p", 1)[0]) in percentiles
        and (any_percentile or key == f"{metric}_p{percentiles[metric]}")
    ]
    return observation.coarse_quantile_note(only=keys) if keys else None


def _inside_lowest_bucket(
    name: str, signal: Signal, values: Mapping[int, float]
) -> dict[str, float]:
    bound = lowest_bucket(signal)
    if bound is None:
        return {}
    return {f"{name}_p{p}": bound for p, v in values.items() if v <= bound}


# ---- evaluation over raw samples (direct scrape, benchmarks) --------------------------------

Labels = frozenset[tuple[str, str]]
SeriesKey = tuple[str, Labels]  # (series name as exposed, labels)
SeriesSet = Mapping[SeriesKey, Sequence[prommath.Point]]


def matches(labels: Labels, matchers: Iterable[LabelMatcher]) -> bool:
    """PromQL matcher semantics: a missing label is the empty string; regexes are anchored."""
    values = dict(labels)
    for m in matchers:
        value = values.get(m.label, "")
        if m.op == "=" and value != m.value:
            return False
        if m.op == "!=" and value == m.value:
            return False
        if m.op in ("=~", "!~"):
            hit = re.fullmatch(m.value, value) is not None
            if hit != (m.op == "=~"):
                return False
    return True


def resolve_name(signal: Signal, present: Iterable[str]) -> str | None:
    """The first of the signal's names (newest first) that the series set has."""
    names = set(present)
    fam = FAMILIES[signal]
    suffix = "_count" if fam.type is MetricType.HISTOGRAM else ""
    return next((n for n in fam.candidates if n + suffix in names), None)


def evaluate_on_series(
    query: SignalQuery,
    series: SeriesSet,
    *,
    matchers: Sequence[LabelMatcher],
    start: float,
    end: float,
) -> float | None:
    """Evaluate one aggregate like the matching PromQL template would, over ``[start, end]``."""
    base = resolve_name(query.signal, (name for name, _ in series))
    if base is None:
        return None

    def selected(name: str) -> list[tuple[Labels, Sequence[prommath.Point]]]:
        return [
            (lab, pts) for (n, lab), pts in series.items() if n == name and matches(lab, matchers)
        ]

    def total(values: Iterable[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return sum(present) if present else None

    def delta(name: str, *, is_rate: bool) -> float | None:
        return total(
            prommath.extrapolated_delta(pts, start=start, end=end, is_counter=True, is_rate=is_rate)
            for _, pts in selected(name)
        )

    kind = query.kind
    if kind is QueryKind.QUANTILE:
        assert query.quantile is not None
        by_le: dict[float, float] = {}
        for labels, pts in selected(base + "_bucket"):
            r = prommath.extrapolated_delta(
                pts, start=start, end=end, is_counter=True, is_rate=True
            )
            if r is not None:
                le = float(dict(labels).get("le", "+Inf"))
                by_le[le] = by_le.get(le, 0.0) + r
        return prommath.histogram_quantile(query.quantile, list(by_le.items())) if by_le else None
    if kind is QueryKind.MEAN:
        return _ratio(delta(base + "_sum", is_rate=True), delta(base + "_count", is_rate=True))
    if kind is QueryKind.COUNT_INCREASE:
        return delta(base + "_count", is_rate=False)
    if kind is QueryKind.COUNT_RATE:
        return delta(base + "_count", is_rate=True)
    if kind is QueryKind.COUNTER_INCREASE:
        return delta(base, is_rate=False)
    if kind is QueryKind.COUNTER_RATE:
        return delta(base, is_rate=True)
    if kind is QueryKind.GAUGE_SUM_DELTA:
        # PromQL ``delta``: a gauge's change over the range, extrapolated to its edges.
        return total(
            prommath.extrapolated_delta(pts, start=start, end=end, is_counter=False, is_rate=False)
            for _, pts in selected(base)
        )
    if kind is QueryKind.PODS:
        pods = {dict(lab).get("pod", "") for lab, pts in selected(base + "_count")
                if prommath.in_range(pts, start, end)}  # fmt: skip
        return float(len(pods)) if pods else None
    over = (
        prommath.avg_over_time
        if kind in (QueryKind.GAUGE_SUM_AVG, QueryKind.GAUGE_AVG_AVG)
        else (prommath.max_over_time)
    )
    per_series = [
        v for _, pts in selected(base) if (v := over(pts, start=start, end=end)) is not None
    ]
    if not per_series:
        return None
    if kind in (QueryKind.GAUGE_SUM_AVG, QueryKind.GAUGE_SUM_MAX):
        return sum(per_series)
    if kind is QueryKind.GAUGE_AVG_AVG:
        return sum(per_series) / len(per_series)
    return max(per_series)


def cache_config_from_series(
    series: SeriesSet,
    matchers: Sequence[LabelMatcher],
    *,
    start: float | None = None,
    end: float | None = None,
) -> dict[str, str]:
    """Labels of the selected ``vllm:cache_config_info`` series (minus target labels).

    With a window (``start``/``end``), only series with a sample inside it count, and the one
    sampled last wins: a replaced pod's echo, still in the scrape buffer, must not answer for
    the pod serving now. Without one, the first series in label order (the old behaviour).
    """
    name = FAMILIES[Signal.CACHE_CONFIG].current
    windowed = start is not None or end is not None
    lo = float("-inf") if start is None else start
    hi = float("inf") if end is None else end
    best: tuple[float, list[tuple[str, str]]] | None = None
    for (n, labels), points in series.items():
        if n != name or not matches(labels, matchers):
            continue
        inside = prommath.in_range(points, lo, hi) if windowed else list(points)
        if windowed and not inside:
            continue
        last = max((t for t, _ in inside), default=float("-inf")) if windowed else 0.0
        key = sorted(labels)
        # Latest sample first; ties (and the unwindowed case) by label order, first wins.
        if best is None or last > best[0] or (last == best[0] and key < best[1]):
            best = (last, key)
    if best is None:
        return {}
    return {k: v for k, v in best[1] if k not in TARGET_LABELS}


TARGET_LABELS = frozenset({"namespace", "pod", "container", "instance", "job", "__name__"})
