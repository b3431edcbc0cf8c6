"""PromQL templates render strictly, and hostile values cannot change a query's shape."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from latency_tuner.core.promql import (
    TEMPLATES,
    LabelMatcher,
    PromQLError,
    default_matchers,
    duration,
    escape_label_value,
    render,
    selector,
)


def test_a_quantile_query_renders_with_its_variables() -> None:
    q = render(
        "histogram_quantile",
        metric="vllm:time_to_first_token_seconds",
        selector='namespace="ml"',
        window="300s",
        quantile="0.9",
    )
    assert q == (
        "histogram_quantile(0.9, sum by (le) "
        '(rate(vllm:time_to_first_token_seconds_bucket{namespace="ml"}[300s])))'
    )


def test_a_missing_variable_is_an_error() -> None:
    with pytest.raises(PromQLError, match="needs window"):
        render("counter_rate", metric="vllm:prompt_tokens_total", selector="")


def test_an_unexpected_variable_is_an_error() -> None:
    with pytest.raises(PromQLError, match="does not take quantile"):
        render("counter_rate", metric="m", selector="", window="5s", quantile="0.5")


def test_an_unknown_template_is_an_error() -> None:
    with pytest.raises(PromQLError, match="no PromQL template named 'nope'"):
        render("nope")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("metric", 'vllm:x{a="b"}'),
        ("metric", "rate(x[5m])"),
        ("window", "5m] or vector(1) #"),
        ("window", "0s"),
        ("quantile", "0.9) or vector(1"),
        ("quantile", "2"),
    ],
)
def test_a_variable_that_would_change_the_query_is_refused(name: str, value: str) -> None:
    variables = {"metric": "vllm:x", "selector": "", "window": "5s", "quantile": "0.5"}
    variables[name] = value
    with pytest.raises(PromQLError, match=f"invalid value for {name}"):
        render("histogram_quantile", **variables)


def test_a_hostile_label_value_stays_inside_its_string_literal() -> None:
    evil = 'x"} or vector(1) or {a="'
    q = render(
        "counter_rate",
        metric="vllm:prompt_tokens_total",
        selector=selector([LabelMatcher("pod", "=", evil)]),
        window="60s",
    )
    # The only unescaped quotes are the two around the value.
    assert len(re.findall(r'(?<!\\)"', q)) == 2
    assert 'pod="x\\"} or vector(1) or {a=\\""' in q


def test_a_hostile_label_name_is_refused() -> None:
    with pytest.raises(PromQLError, match="invalid label name"):
        selector([LabelMatcher('pod"} or {x', "=", "a")])


def test_a_deployment_name_with_regex_characters_is_matched_literally() -> None:
    (ns, pod) = default_matchers("ml", "llama.3+b")
    assert ns.render() == 'namespace="ml"'
    assert pod.render() == 'pod=~"llama\\\\.3\\\\+b-[a-z0-9]+-[a-z0-9]+"'


def test_selectors_render_the_same_whatever_the_matcher_order() -> None:
    a, b = LabelMatcher("a", "=", "1"), LabelMatcher("b", "!=", "2")
    assert selector([a, b]) == selector([b, a]) == 'a="1",b!="2"'


def test_durations_are_whole_seconds_and_never_zero() -> None:
    assert duration(299.6) == "300s"
    assert duration(0.2) == "1s"


@given(st.text())
def test_any_escaped_value_round_trips_through_a_promql_string(value: str) -> None:
    escaped = escape_label_value(value)
    # Every quote is escaped, and unescaping gives the original back.
    assert re.search(r'(?<!\\)(\\\\)*"', escaped) is None
    unescaped = re.sub(
        r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), escaped
    )
    assert unescaped == value


def test_every_template_renders_when_given_its_variables() -> None:
    for name, text in TEMPLATES.items():
        variables = {"metric": "vllm:m", "selector": "", "window": "60s", "quantile": "0.5",
                     "by": "namespace,pod", "names": "vllm:a|vllm:b_count"}  # fmt: skip
        used = {k: v for k, v in variables.items() if f"${k}" in text or f"${{{k}}}" in text}
        assert "$" not in render(name, **used)


def test_a_grouping_or_a_name_list_cannot_change_the_shape_of_a_query() -> None:
    with pytest.raises(PromQLError):
        render("grouped_rate", metric="vllm:m", selector="", window="60s", by="pod) or vector(1")
    with pytest.raises(PromQLError):
        render("grouped_names", by="pod", selector="", names='vllm:a"} or vector(1) or {x="')
