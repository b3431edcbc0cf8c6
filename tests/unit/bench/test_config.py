from __future__ import annotations

import pytest

from latency_tuner.loadgen import BenchConfig


@pytest.mark.parametrize(
    "url",
    ["http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/"],
)
def test_the_server_root_is_found_with_or_without_a_trailing_v1(url: str) -> None:
    assert BenchConfig(url=url).base_url == "http://h:8000"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"url": "h:8000"}, "http://"),
        ({"concurrency": 0}, "concurrency"),
        ({"requests": 1, "duration": 1.0}, "not both"),
        ({"rate": 0.0}, "rate"),
        ({"prompt_tokens": 4, "shared_prefix_tokens": 4}, "shared_prefix_tokens"),
        ({"output_tokens": 0}, "output_tokens"),
        ({"duration": -1.0}, "duration"),
    ],
)
def test_impossible_configurations_are_refused_with_the_reason(
    overrides: dict[str, object], message: str
) -> None:
    values: dict[str, object] = {"url": "http://h:8000", **overrides}
    with pytest.raises(ValueError, match=message):
        BenchConfig(**values)  # type: ignore[arg-type]


def test_neither_requests_nor_duration_is_the_run_until_stopped_mode() -> None:
    config = BenchConfig(url="http://h")
    assert (config.requests, config.duration) == (None, None)
