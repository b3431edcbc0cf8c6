"""A server that falls behind its arrivals: saturation as evidence, and queueing read from the
waiting gauge (Little's law) when vLLM's queue-time histogram lags behind a growing backlog.

The windows reproduce those of the convergence benchmark's failures (issue 19): a saturated
server finishing fewer requests per window than minRequests, and a growing backlog whose
recorded queue time was 44% of TTFT against the 50% threshold.
"""

from __future__ import annotations

from typing import Any

from tests.unit.core.builders import H100, command_line, healthy, knobs, objectives

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.evidence import Bottleneck, Finding
from latency_tuner.core.observation import NoData, Observation
from latency_tuner.core.rollout import analyse
from latency_tuner.core.saturation import flow

CL = command_line("--max-num-seqs", "64")


def saturated_window(**overrides: Any) -> Observation:
    """30 s in which 6 requests finished while 66 arrived: the waiting queue grew by 60."""
    fields: dict[str, Any] = {
        "window_seconds": 30.0,
        "requests": 6,
        "request_rate": 0.2,
        "ttft": {50: 9.0, 90: 14.0, 99: 16.0},
        "ttft_mean": 9.5,
        "queue_time_mean": 3.0,  # recorded at finish: the long waits have not finished
        "prefill_time_mean": 1.2,
        "prompt_tokens_mean": 6000.0,
        "running_mean": 64.0,
        "running_max": 64.0,
        "running_delta": 0.0,
        "waiting_mean": 40.0,
        "waiting_max": 70.0,
        "waiting_delta": 60.0,
        "kv_cache_usage_mean": 0.6,
        "kv_cache_usage_max": 0.7,
    }
    return healthy(**{**fields, **overrides})


def spec_with(min_requests: int) -> LatencyTargetSpec:
    return LatencyTargetSpec.model_validate(
        {
            "targetRef": {"name": "llama", "container": "vllm"},
            "objectives": {"ttft": {"percentile": 90, "threshold": "2s"}},
            "evaluation": {"window": "30s", "minRequests": min_requests},
            "knobs": {"maxNumSeqs": {"min": 16, "max": 512}},
        }
    )


def test_a_saturated_window_with_fewer_requests_than_min_requests_is_acted_on() -> None:
    analysis = analyse(spec_with(20), saturated_window(), CL, H100)
    assert analysis.usable is not None
    assert Finding.LOW_TRAFFIC not in analysis.diagnosis.findings
    assert analysis.diagnosis.bottleneck is Bottleneck.QUEUEING
    assert any(e.signal == "backlog_growth" for e in analysis.diagnosis.evidence)


def test_a_steady_full_queue_with_few_requests_is_a_slow_server_not_low_traffic() -> None:
    # A fixed set of clients (closed loop): the queue cannot grow, so it never looks saturated,
    # but 64 requests were in flight all window while 6 finished. Waiting for minRequests would
    # wait forever (the convergence benchmark's KV-pressure runs did: 0 rollouts).
    window = saturated_window(waiting_delta=3.0, waiting_mean=4.0)
    assert not flow(window).saturated
    analysis = analyse(spec_with(20), window, CL, H100)
    assert analysis.usable is window
    assert Finding.LOW_TRAFFIC not in analysis.diagnosis.findings
    busy = next(e for e in analysis.diagnosis.evidence if e.signal == "in_flight")
    assert busy.value == 68.0


def test_few_requests_with_an_idle_server_are_still_too_little_traffic() -> None:
    # 6 requests in 30 s with under one in flight on average: the server waits for work.
    window = saturated_window(waiting_delta=0.0, waiting_mean=0.0, running_mean=0.6)
    analysis = analyse(spec_with(20), window, CL, H100)
    assert analysis.usable is None
    assert Finding.LOW_TRAFFIC in analysis.diagnosis.findings


def test_fewer_than_three_finished_requests_are_never_enough() -> None:
    window = saturated_window(requests=2, waiting_delta=0.0, waiting_mean=4.0)
    assert analyse(spec_with(20), window, CL, H100).usable is None


def test_saturation_needs_completions_below_arrivals_and_a_rising_queue() -> None:
    assert flow(saturated_window()).saturated
    assert flow(saturated_window()).arrivals == 66.0
    assert not flow(saturated_window(waiting_delta=-20.0)).saturated  # draining
    assert not flow(saturated_window(waiting_delta=None)).saturated  # unknown: no claim


def test_a_window_where_nothing_finished_as_the_queue_grew_is_diagnosed_as_a_stalled_server() -> (
    None
):
    stalled = NoData(
        reason="no requests finished in the window",
        window_seconds=30.0,
        running_delta=0.0,
        waiting_delta=50.0,
        waiting_mean=25.0,
    )
    diagnosis = diagnose(stalled, objectives(ttft="1s"), CL, H100, knobs())
    assert Finding.NO_METRICS in diagnosis.findings
    evidence = next(e for e in diagnosis.evidence if e.signal == "backlog_growth")
    assert "50 requests arrived and 0 finished" in evidence.text
    assert any("finished no request while requests piled up" in a for a in diagnosis.advice)
    quiet = stalled.model_copy(update={"waiting_delta": 0.0, "waiting_mean": 0.0})
    advice = diagnose(quiet, objectives(ttft="1s"), CL, H100, knobs()).advice
    assert any("check that Prometheus scrapes the vLLM pods" in a for a in advice)


def test_a_growing_backlog_is_queueing_even_when_recorded_queue_time_is_under_half_of_ttft() -> (
    None
):
    # Recorded queue time 1.76 s of 4.0 s mean TTFT (44%): read alone, "long prefill".
    # 30 requests wait on average at ~10.7 arrivals/s: Little's law says ~2.8 s in queue.
    window = healthy(
        window_seconds=60.0,
        requests=600,
        request_rate=10.0,
        ttft={50: 3.5, 90: 5.0, 99: 6.0},
        ttft_mean=4.0,
        queue_time_mean=1.76,
        prefill_time_mean=2.2,
        prompt_tokens_mean=2000.0,
        running_mean=20.0,
        running_max=24.0,
        running_delta=0.0,
        waiting_mean=30.0,
        waiting_max=60.0,
        waiting_delta=40.0,
    )
    d = diagnose(window, objectives(ttft="2s"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.QUEUEING
    share = next(e for e in d.evidence if e.signal == "queue_time_share")
    assert share.value is not None
    assert share.value > 0.6
    assert "Little's law" in share.text


def test_recorded_queue_time_counts_when_it_is_the_larger_estimate() -> None:
    window = healthy(
        ttft={50: 0.9, 90: 1.2, 99: 1.5},
        ttft_mean=1.0,
        queue_time_mean=0.7,
        waiting_mean=0.5,  # Little: 0.25 s at 2/s
    )
    d = diagnose(window, objectives(ttft="500ms"), CL, H100, knobs())
    assert d.bottleneck is Bottleneck.QUEUEING
    share = next(e for e in d.evidence if e.signal == "queue_time_share")
    assert share.value == 0.7
