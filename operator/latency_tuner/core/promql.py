"""PromQL as named templates, rendered by one strict function.

Queries are never built by string concatenation at call sites: each is a named template here,
and ``render`` fills it. A missing or unknown variable is an error; label values are escaped and
label names and metric names are checked, so a hostile Deployment or label value cannot change
the shape of a query (it can only fail to match). Pure: no I/O.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

MatchOp = Literal["=", "!=", "=~", "!~"]
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")


class PromQLError(ValueError):
    """A template or a variable that cannot make a safe query."""


@dataclass(frozen=True)
class LabelMatcher:
    """One ``label op "value"`` term of a series selector."""

    label: str
    op: MatchOp
    value: str

    def render(self) -> str:
        if not _LABEL_NAME.match(self.label):
            raise PromQLError(f"invalid label name {self.label!r}")
        if self.op not in ("=", "!=", "=~", "!~"):
            raise PromQLError(f"invalid match operator {self.op!r}")
        return f'{self.label}{self.op}"{escape_label_value(self.value)}"'


def escape_label_value(value: str) -> str:
    """Escape a string for a double-quoted PromQL literal (backslash, quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


def escape_regex(value: str) -> str:
    """Quote regex metacharacters (RE2 syntax) so a literal can sit inside ``=~``."""
    return re.sub(r"([.\\+*?\[\]^$(){}|])", r"\\\1", value)


def selector(matchers: Iterable[LabelMatcher]) -> str:
    """Render the inside of ``{...}``; matchers are sorted so equal selectors render equally."""
    return ",".join(sorted(m.render() for m in matchers))


def default_matchers(namespace: str, deployment: str) -> tuple[LabelMatcher, ...]:
    """The Deployment's pods: ``namespace="ns", pod=~"deploy-.*"``.

    A Deployment's pods are named ``<deployment>-<replicaset hash>-<suffix>``.
    """
    return (
        LabelMatcher("namespace", "=", namespace),
        LabelMatcher("pod", "=~", f"{escape_regex(deployment)}-[a-z0-9]+-[a-z0-9]+"),
    )


def duration(seconds: float) -> str:
    """A PromQL range: whole seconds, at least 1s."""
    return f"{max(1, round(seconds))}s"


# Variables: metric (a base metric name), selector (rendered matchers), window (a range),
# quantile (0-1). Histogram templates take the base name; counters their full `_total` name.
TEMPLATES: Mapping[str, str] = {
    "histogram_quantile": (
        "histogram_quantile($quantile, sum by (le) (rate(${metric}_bucket{$selector}[$window])))"
    ),
    "histogram_mean": (
        "sum(rate(${metric}_sum{$selector}[$window]))"
        " / sum(rate(${metric}_count{$selector}[$window]))"
    ),
    "histogram_count_increase": "sum(increase(${metric}_count{$selector}[$window]))",
    "histogram_count_rate": "sum(rate(${metric}_count{$selector}[$window]))",
    "counter_increase": "sum(increase(${metric}{$selector}[$window]))",
    "counter_rate": "sum(rate(${metric}{$selector}[$window]))",
    # Gauges summed over pods (requests) or averaged over pods (usage fractions).
    "gauge_sum_avg": "sum(avg_over_time(${metric}{$selector}[$window]))",
    "gauge_sum_max": "sum(max_over_time(${metric}{$selector}[$window]))",
    "gauge_avg_avg": "avg(avg_over_time(${metric}{$selector}[$window]))",
    "gauge_max_max": "max(max_over_time(${metric}{$selector}[$window]))",
    # A gauge's change over the window, summed over pods (is the queue growing?).
    "gauge_sum_delta": "sum(delta(${metric}{$selector}[$window]))",
    "series": "${metric}{$selector}",
    "pods": "count(count by (pod) (last_over_time(${metric}_count{$selector}[$window])))",
    # Grouped forms for a batch of targets: the same aggregates kept apart by the labels that
    # tell targets apart (``by``), split per target in the operator. ``metric`` is the full
    # series name here (``..._bucket``, ``..._sum``, a counter's ``..._total``).
    "grouped_rate": "sum by ($by) (rate(${metric}{$selector}[$window]))",
    "grouped_increase": "sum by ($by) (increase(${metric}{$selector}[$window]))",
    "grouped_sum_avg": "sum by ($by) (avg_over_time(${metric}{$selector}[$window]))",
    "grouped_count_avg": "count by ($by) (avg_over_time(${metric}{$selector}[$window]))",
    "grouped_sum_max": "sum by ($by) (max_over_time(${metric}{$selector}[$window]))",
    "grouped_max_max": "max by ($by) (max_over_time(${metric}{$selector}[$window]))",
    "grouped_sum_delta": "sum by ($by) (delta(${metric}{$selector}[$window]))",
    "grouped_count_last": "count by ($by) (last_over_time(${metric}{$selector}[$window]))",
    "grouped_names": 'count by ($by) ({__name__=~"$names",$selector})',
}

_VARIABLE_CHECKS: Mapping[str, Callable[[str], bool]] = {
    "metric": lambda v: bool(_METRIC_NAME.match(v)),
    "window": lambda v: bool(re.fullmatch(r"[1-9][0-9]*[smh]", v)),
    "quantile": lambda v: bool(re.fullmatch(r"(0(\.[0-9]+)?|1(\.0+)?)", v)),
    # A selector made by `selector()`: its values are escaped already.
    "selector": lambda v: True,
    "by": lambda v: all(_LABEL_NAME.match(x) for x in v.split(",")),
    "names": lambda v: all(_METRIC_NAME.match(x) for x in v.split("|")),
}


def render(name: str, **variables: str) -> str:
    """Fill template ``name``; every placeholder must be given, and nothing else."""
    try:
        template = string.Template(TEMPLATES[name])
    except KeyError:
        raise PromQLError(f"no PromQL template named {name!r}") from None
    wanted = {
        m.group("named") or m.group("braced")
        for m in template.pattern.finditer(template.template)
        if m.group("named") or m.group("braced")
    }
    missing = wanted - variables.keys()
    if missing:
        raise PromQLError(f"template {name!r} needs {', '.join(sorted(missing))}")
    extra = variables.keys() - wanted
    if extra:
        raise PromQLError(f"template {name!r} does not take {', '.join(sorted(extra))}")
    for key, value in variables.items():
        if not _VARIABLE_CHECKS[key](value):
            raise PromQLError(f"invalid value for {key}: {value!r}")
    return template.substitute(variables)
