"""The engine's config echo (vllm:cache_config_info) answers for the pod serving in the window,
never for a replaced pod whose series is still in the scrape buffer."""

from __future__ import annotations

from latency_tuner.core.promql import LabelMatcher
from latency_tuner.core.signals import Labels, SeriesKey, cache_config_from_series

ECHO = "vllm:cache_config_info"
POD = [LabelMatcher("pod", "=~", "llama-.*")]


def echo(pod: str, prefix: str) -> SeriesKey:
    labels: Labels = frozenset({("pod", pod), ("enable_prefix_caching", prefix)})
    return (ECHO, labels)


# The old pod ("llama-a", prefix caching off) served until t=100; the new one ("llama-b", on)
# from t=100.
SERIES = {
    echo("llama-a", "False"): [(float(t), 1.0) for t in range(0, 101, 5)],
    echo("llama-b", "True"): [(float(t), 1.0) for t in range(100, 201, 5)],
}


def test_only_the_pod_with_samples_in_the_window_answers() -> None:
    got = cache_config_from_series(SERIES, POD, start=150.0, end=200.0)
    assert got == {"enable_prefix_caching": "True"}


def test_when_both_pods_are_in_the_window_the_one_sampled_last_answers() -> None:
    got = cache_config_from_series(SERIES, POD, start=60.0, end=160.0)
    assert got == {"enable_prefix_caching": "True"}


def test_a_window_without_any_echo_gives_nothing() -> None:
    assert cache_config_from_series(SERIES, POD, start=300.0, end=400.0) == {}


def test_without_a_window_the_first_series_in_label_order_answers_as_before() -> None:
    assert cache_config_from_series(SERIES, POD) == {"enable_prefix_caching": "False"}
