"""Label matchers evaluated in the operator's process, with PromQL's semantics and RE2.

The direct scrape selects its stored series with them, and the batched Prometheus source splits
one grouped answer per target with them. A missing label is the empty string and regular
expressions are anchored, as in PromQL. Regular expressions run with RE2 (linear time, the
engine Prometheus itself uses), never Python's backtracking ``re``: a tenant writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import re2

from latency_tuner.adapters.metrics.errors import QueryFailed
from latency_tuner.core.promql import LabelMatcher

Predicate = Callable[[Mapping[str, str]], bool]

_META = set(".[](){}^$|?*+\\")


def compile_matchers(matchers: Sequence[LabelMatcher]) -> Predicate:
    """A predicate over a series' labels; ``QueryFailed`` for a regex RE2 cannot compile."""
    try:
        compiled = [(m, re2.compile(m.value) if m.op in ("=~", "!~") else None) for m in matchers]
    except re2.error as exc:
        raise QueryFailed(f"a label matcher is not an RE2 regular expression: {exc}") from exc

    def keep(labels: Mapping[str, str]) -> bool:
        for m, pattern in compiled:
            value = labels.get(m.label, "")
            if pattern is None:
                if (value == m.value) != (m.op == "="):
                    return False
            elif (pattern.fullmatch(value) is not None) != (m.op == "=~"):
                return False
        return True

    return keep


def literal_prefix(matcher: LabelMatcher) -> str | None:
    """A string every value the matcher selects starts with (None when there is none to say).

    Lets a caller narrow sorted label values by bisection before running the matcher itself;
    conservative: any alternation, group or flag gives up, a quantifier drops the character
    it applies to.
    """
    if matcher.op == "=":
        return matcher.value
    if matcher.op != "=~" or "|" in matcher.value:
        return None
    out: list[str] = []
    text = matcher.value
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in _META | {"-"}:
            out.append(text[i + 1])
            i += 2
            continue
        if c in _META:
            if c in "?*{" and out:
                out.pop()  # the last literal may occur zero times
            break
        out.append(c)
        i += 1
    return "".join(out)
