"""A batch's answer is split by each target's matchers exactly as PromQL would select: the
bisection on a pod name prefix never drops a group the matchers select."""

from __future__ import annotations

import itertools

import pytest

from latency_tuner.adapters.metrics.grouped import Answer
from latency_tuner.adapters.metrics.matching import compile_matchers, literal_prefix
from latency_tuner.core.promql import LabelMatcher, default_matchers

PODS = [
    "llama-7d9f-abc", "llama-big-7d9f-abc", "llama-7d9f-abd", "llamas-1-2", "llama", "lla",
    "mistral-1-2", "gemma-5-6", "phi-1-1", "a|b", "llama-7d9f-abc-extra", "",
]  # fmt: skip
PATTERNS = [
    "llama-[a-z0-9]+-[a-z0-9]+", "llama-.*", "llamas?-.*", "(gemma|phi)-.+", "gemma-5-6|phi-.*",
    "llama.*", "lla(ma)?", "l+ama.*", "llam[a-z]-.*", "a\\|b", ".*", "llama\\-big-.*",
    "(?i)LLAMA-.*", "llam{1,2}a-.*",
]  # fmt: skip


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_pod_regex_selects_the_same_groups_with_or_without_the_prefix_shortcut(
    pattern: str,
) -> None:
    answer = Answer(("namespace", "pod"))
    rows = [{"metric": {"__name__": "x", "namespace": ns, "pod": pod}, "value": [0, "1"]}
            for ns, pod in itertools.product(("ml", "other"), PODS)]  # fmt: skip
    answer.add_names(rows)
    for op in ("=~", "!~"):
        matchers = [LabelMatcher("namespace", "=", "ml"), LabelMatcher("pod", op, pattern)]
        keep = compile_matchers(matchers)
        expected = sorted(("ml", p) for p in PODS if keep({"namespace": "ml", "pod": p}))
        assert sorted(answer.select(matchers)) == expected, (op, pattern)


def test_a_literal_prefix_is_only_claimed_where_every_match_starts_with_it() -> None:
    assert literal_prefix(default_matchers("ml", "llama")[1]) == "llama-"
    assert literal_prefix(LabelMatcher("pod", "=~", "llamas?-x")) == "llama"
    assert literal_prefix(LabelMatcher("pod", "=~", "a|b")) is None
    assert literal_prefix(LabelMatcher("pod", "!~", "abc")) is None
    assert literal_prefix(LabelMatcher("pod", "=", "exact")) == "exact"
    assert literal_prefix(LabelMatcher("pod", "=~", "(?i)x")) == ""
