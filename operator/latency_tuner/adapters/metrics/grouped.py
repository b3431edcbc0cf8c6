"""Many targets' observations from one query per aggregate: the plan of a batch and its split.

A per-target observation sums each aggregate over the target's series
(``sum(rate(x{namespace="ns", pod=~"llama-.*"}[w]))``). A batch asks once for every target of
the namespaces it covers, keeping apart the groups that targets can tell apart
(``sum by (namespace, pod) (rate(x{namespace=~"ns|other"}[w]))``), and adds up, for each
target, the groups its own label matchers select. The groups are cut by every label any
target's matchers name, so a target selects whole groups: the split sums exactly the series
the per-target query would have summed. Histogram quantiles are summed per bucket (``le``) and
interpolated here with Prometheus' own arithmetic (``core.prommath``); means and averages are
ratios of summed parts. One query per aggregate per metric name in use, whatever the number
of targets.

No I/O here: ``parts`` says what to ask, ``Answer`` holds what came back, ``split`` answers
one target.
"""

from __future__ import annotations

import bisect
import functools
import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from latency_tuner.adapters.metrics.errors import QueryFailed
from latency_tuner.adapters.metrics.matching import Predicate, compile_matchers, literal_prefix
from latency_tuner.core import prommath, promql, signals
from latency_tuner.core.observation import ObservationResult
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.core.signals import QueryKind, SignalQuery
from latency_tuner.vllm.metrics import FAMILIES, MetricType, Signal

GroupKey = tuple[str, ...]  # the group's values of ``Answer.labels``, in that order


@dataclass(frozen=True, order=True)
class Part:
    """One grouped query: a template of ``core.promql`` over one full series name."""

    template: str
    metric: str


def _parts(kind: QueryKind, base: str) -> tuple[Part, ...]:
    """The grouped queries an aggregate of ``base`` is made of."""
    return {
        QueryKind.QUANTILE: (Part("grouped_rate", base + "_bucket"),),
        QueryKind.MEAN: (
            Part("grouped_rate", base + "_sum"),
            Part("grouped_rate", base + "_count"),
        ),
        QueryKind.COUNT_INCREASE: (Part("grouped_increase", base + "_count"),),
        QueryKind.COUNT_RATE: (Part("grouped_rate", base + "_count"),),
        QueryKind.COUNTER_INCREASE: (Part("grouped_increase", base),),
        QueryKind.COUNTER_RATE: (Part("grouped_rate", base),),
        QueryKind.GAUGE_SUM_AVG: (Part("grouped_sum_avg", base),),
        QueryKind.GAUGE_SUM_MAX: (Part("grouped_sum_max", base),),
        QueryKind.GAUGE_AVG_AVG: (Part("grouped_sum_avg", base), Part("grouped_count_avg", base)),
        QueryKind.GAUGE_MAX_MAX: (Part("grouped_max_max", base),),
        QueryKind.GAUGE_SUM_DELTA: (Part("grouped_sum_delta", base),),
        QueryKind.PODS: (Part("grouped_count_last", base + "_count"),),
    }[kind]


def wanted_names() -> list[str]:
    """Every series name whose presence picks a signal's name generation (as the per-target
    source's ``count by (__name__)`` would see them), and the config echo."""
    names: list[str] = []
    for fam in FAMILIES.values():
        suffix = "_count" if fam.type is MetricType.HISTOGRAM else ""
        names.extend(n + suffix for n in fam.candidates)
    return sorted(set(names))


def _name_for(signal: Signal, present: Iterable[str]) -> str | None:
    return signals.resolve_name(signal, present)


@dataclass
class Answer:
    """What a batch's queries returned, indexed by group.

    ``labels``: the grouping labels (``namespace`` first, then ``pod``, then the rest, sorted).
    ``names``: series names present per group. ``values``: per grouped query, one value per
    group. ``buckets``: per bucket query, its bucket bounds and per group an array of rates in
    their order (NaN: no such bucket; a rate of counters is never NaN itself). ``configs``: per
    group, the position and labels of its first ``cache_config_info`` series in the answer.
    Compact on purpose: a batch holds a few numbers per pod, not a row object per series
    (1,000 pods: ~2 MiB instead of ~30).
    """

    labels: tuple[str, ...]
    names: dict[GroupKey, frozenset[str]] = field(default_factory=dict)
    values: dict[Part, dict[GroupKey, float]] = field(default_factory=dict)
    buckets: dict[Part, tuple[tuple[float, ...], dict[GroupKey, array[float]]]] = field(
        default_factory=dict
    )
    configs: dict[GroupKey, tuple[int, dict[str, str]]] = field(default_factory=dict)
    _by_namespace: dict[str, list[tuple[str, GroupKey]]] | None = None  # built on first use
    _keys: dict[GroupKey, GroupKey] = field(default_factory=dict)  # one tuple per group

    def key(self, metric: Mapping[str, Any]) -> GroupKey:
        key = tuple(str(metric.get(label, "")) for label in self.labels)
        return self._keys.setdefault(key, key)

    def add_names(self, rows: Sequence[Mapping[str, Any]]) -> None:
        found: dict[GroupKey, set[str]] = {}
        for row in rows:
            metric = row["metric"]
            found.setdefault(self.key(metric), set()).add(str(metric.get("__name__", "")))
        shared: dict[frozenset[str], frozenset[str]] = {}  # most pods expose the same names
        for group, names in found.items():
            frozen = frozenset(names)
            self.names[group] = shared.setdefault(frozen, frozen)
        self._by_namespace = None

    def add(self, part: Part, rows: Sequence[Mapping[str, Any]]) -> None:
        if part.metric.endswith("_bucket") and part.template == "grouped_rate":
            per: dict[GroupKey, dict[float, float]] = {}
            for row in rows:
                metric = row["metric"]
                le = float(str(metric.get("le", "+Inf")))
                per.setdefault(self.key(metric), {})[le] = _value(row)
            bounds = tuple(sorted({le for values in per.values() for le in values}))
            self.buckets[part] = (
                bounds,
                {g: array("d", (v.get(le, math.nan) for le in bounds)) for g, v in per.items()},
            )
        else:
            self.values[part] = {self.key(row["metric"]): _value(row) for row in rows}
        self._by_namespace = None

    def add_configs(self, rows: Sequence[Mapping[str, Any]]) -> None:
        for i, row in enumerate(rows):
            metric = row["metric"]
            self.configs.setdefault(
                self.key(metric), (i, {str(k): str(v) for k, v in metric.items()})
            )
        self._by_namespace = None

    def _groups(self) -> dict[str, list[tuple[str, GroupKey]]]:
        """Every group of any query, by namespace, sorted by pod. A group may be missing from
        the names (a pod gone for longer than Prometheus' lookback still has samples inside a
        long window): the per-target sums would count it, so the split does too."""
        if self._by_namespace is None:
            every: set[GroupKey] = set(self.names) | set(self.configs)
            for values in self.values.values():
                every.update(values)
            for _, per in self.buckets.values():
                every.update(per)
            index: dict[str, list[tuple[str, GroupKey]]] = {}
            for group in every:
                index.setdefault(group[0], []).append((group[1], group))
            self._by_namespace = {ns: sorted(items) for ns, items in index.items()}
        return self._by_namespace

    def select(self, matchers: Sequence[LabelMatcher]) -> list[GroupKey]:
        """The groups the target's matchers select (its namespace's groups only: a target's
        matchers always hold its namespace; a prefix of the pod narrows by bisection)."""
        keep = _compiled(tuple(matchers))
        by_namespace = self._groups()
        namespace = next(
            (m.value for m in matchers if m.label == "namespace" and m.op == "="), None
        )
        if namespace is None:
            candidates = [g for items in by_namespace.values() for _, g in items]
        else:
            items = by_namespace.get(namespace, [])
            prefix = next(
                (p for m in matchers if m.label == "pod" and (p := literal_prefix(m)) is not None),
                "",
            )
            lo = bisect.bisect_left(items, (prefix,))
            candidates = []
            for pod, group in items[lo:]:
                if not pod.startswith(prefix):
                    break
                candidates.append(group)
        return [g for g in candidates if keep(dict(zip(self.labels, g, strict=True)))]


@functools.lru_cache(maxsize=4096)
def _compiled(matchers: tuple[LabelMatcher, ...]) -> Predicate:
    return compile_matchers(matchers)


def _value(row: Mapping[str, Any]) -> float:
    try:
        return float(row["value"][1])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise QueryFailed(f"unexpected sample in Prometheus answer: {str(row)[:200]}") from exc


def group_labels(matcher_sets: Iterable[Sequence[LabelMatcher]]) -> tuple[str, ...]:
    """``namespace``, ``pod`` and every other label the targets' matchers name."""
    extra = {m.label for ms in matcher_sets for m in ms} - {"namespace", "pod", "le", "__name__"}
    return ("namespace", "pod", *sorted(extra))


def parts(answer: Answer) -> list[Part]:
    """The grouped queries of every aggregate, for each name generation present in the batch
    (a target of the batch's namespaces may use any of them)."""
    present: set[str] = set().union(*answer.names.values()) if answer.names else set()
    out: set[Part] = set()
    for query in signals.queries_for():
        fam = FAMILIES[query.signal]
        suffix = "_count" if fam.type is MetricType.HISTOGRAM else ""
        for name in fam.candidates:
            if name + suffix in present:
                out.update(_parts(query.kind, name))
    return sorted(out)


def render(part: Part, *, labels: Sequence[str], selector: str, window: float) -> str:
    by = list(labels) + (["le"] if part.metric.endswith("_bucket") else [])
    return promql.render(
        part.template,
        metric=part.metric,
        by=",".join(by),
        selector=selector,
        window=promql.duration(window),
    )


def _present(answer: Answer, groups: Sequence[GroupKey]) -> set[str]:
    out: set[str] = set()
    for g in groups:
        out |= answer.names.get(g, set())
    return out


def split(
    answer: Answer,
    matchers: Sequence[LabelMatcher],
    *,
    window_seconds: float,
    percentiles: Iterable[int] = (),
) -> ObservationResult:
    """One target's Observation (or NoData) out of the batch's answer."""
    groups = answer.select(matchers)
    present = _present(answer, groups)
    results: dict[SignalQuery, float | None] = {}
    for query in signals.queries_for(percentiles):
        base = _name_for(query.signal, present)
        results[query] = None if base is None else _evaluate(answer, query, base, groups)
    config_name = FAMILIES[Signal.CACHE_CONFIG].current
    cache_config: dict[str, str] = {}
    if config_name in present:
        firsts = [answer.configs[g] for g in groups if g in answer.configs]
        if firsts:
            labels = min(firsts, key=lambda c: c[0])[1]
            cache_config = {k: v for k, v in labels.items() if k not in signals.TARGET_LABELS}
    return signals.assemble(results, window_seconds=window_seconds, cache_config=cache_config)


def _evaluate(
    answer: Answer, query: SignalQuery, base: str, groups: Sequence[GroupKey]
) -> float | None:
    kind = query.kind
    if kind is QueryKind.QUANTILE:
        assert query.quantile is not None
        bounds, per = answer.buckets.get(Part("grouped_rate", base + "_bucket"), ((), {}))
        by_le: dict[float, float] = {}
        for g in groups:
            rates = per.get(g)
            if rates is None:
                continue
            for le, value in zip(bounds, rates, strict=True):
                if not math.isnan(value):
                    by_le[le] = by_le.get(le, 0.0) + value
        if not by_le:
            return None
        return _finite(prommath.histogram_quantile(query.quantile, list(by_le.items())))
    found = [answer.values.get(p, {}) for p in _parts(kind, base)]
    if kind is QueryKind.PODS:
        pods = {g[1] for g in groups if g in found[0]}
        return float(len(pods)) if pods else None
    if kind is QueryKind.GAUGE_MAX_MAX:
        tops = [found[0][g] for g in groups if g in found[0]]
        return _finite(max(tops)) if tops else None
    totals = [_sum(values, groups) for values in found]
    if len(totals) == 2:  # a ratio: histogram mean, average of per-series averages
        num, den = totals
        if num is None or den is None or den == 0:
            return None
        return _finite(num / den)
    return _finite(totals[0])


def _sum(values: Mapping[GroupKey, float], groups: Sequence[GroupKey]) -> float | None:
    present = [values[g] for g in groups if g in values]
    return math.fsum(present) if present else None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
