"""A window in which no request finished is NoData, but it keeps the in-flight gauges: with
them the verdict tells a stalled server (requests piling up) from a quiet one."""

from __future__ import annotations

from latency_tuner.core.observation import NoData
from latency_tuner.core.saturation import flow, saturated
from latency_tuner.core.signals import REQUESTS, QueryKind, SignalQuery, assemble
from latency_tuner.vllm.metrics import Signal

RUNNING_DELTA = SignalQuery(QueryKind.GAUGE_SUM_DELTA, Signal.REQUESTS_RUNNING)
WAITING_DELTA = SignalQuery(QueryKind.GAUGE_SUM_DELTA, Signal.REQUESTS_WAITING)
WAITING_MEAN = SignalQuery(QueryKind.GAUGE_SUM_AVG, Signal.REQUESTS_WAITING)


def test_a_stalled_window_is_no_data_that_counts_its_arrivals_and_is_saturated() -> None:
    got = assemble(
        {REQUESTS: 0.0, RUNNING_DELTA: 2.0, WAITING_DELTA: 30.0, WAITING_MEAN: 15.0},
        window_seconds=20.0,
    )
    assert isinstance(got, NoData)
    assert got.reason == "no requests finished in the window"
    assert (got.running_delta, got.waiting_delta, got.waiting_mean) == (2.0, 30.0, 15.0)
    assert flow(got).arrivals == 32.0
    assert saturated(got)


def test_a_quiet_window_is_no_data_that_is_not_saturated() -> None:
    got = assemble({REQUESTS: 0.0, RUNNING_DELTA: 0.0, WAITING_DELTA: 0.0}, window_seconds=20.0)
    assert isinstance(got, NoData)
    assert flow(got).arrivals == 0.0
    assert not saturated(got)
    unknown = assemble({REQUESTS: 0.0}, window_seconds=20.0)
    assert isinstance(unknown, NoData)
    assert unknown.waiting_delta is None
    assert not saturated(unknown)
