"""The calibrated performance model (``core.model``): fitted to a window of the running
configuration, it forecasts that configuration as measured, and a candidate by what the
roofline knows of the change; where it cannot say, it says nothing."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from tests.unit.core.builders import H100, command_line, window_of

from latency_tuner.core import model
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.model import MAX_BATCH
from latency_tuner.core.observation import Observation
from latency_tuner.perf.config import EngineConfig
from latency_tuner.perf.cost import CostModel
from latency_tuner.vllm.args import VllmCommandLine

LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"
SHORT = ("--max-model-len", "16384")  # a 70B's full context does not fit two H100s' KV


def engine(cl: VllmCommandLine, gpus: int = 1, hardware: HardwareInfo = H100) -> EngineConfig:
    config = model.engine_config(cl, gpus, hardware)
    assert config is not None
    return config


def test_the_running_configuration_is_forecast_as_measured() -> None:
    cl = command_line("--tensor-parallel-size", "2", *SHORT, model=LLAMA_70B)
    running = engine(cl, gpus=2)
    calibration = model.calibrate(window_of(running, queue=0.3, slow=1.4), running)
    assert calibration is not None
    forecast = model.forecast(calibration, running, running)
    assert forecast is not None
    for objective in ("ttft", "itl", "e2e"):
        assert forecast.change(objective) == pytest.approx(0.0, abs=1e-6)


def test_twice_the_gpus_of_tensor_parallelism_lower_a_decode_bound_itl() -> None:
    cl = command_line("--tensor-parallel-size", "2", *SHORT, model=LLAMA_70B)
    running, candidate = engine(cl, 2), engine(cl.with_value("tensor-parallel-size", "4"), 4)
    calibration = model.calibrate(window_of(running), running)
    assert calibration is not None
    forecast = model.forecast(calibration, running, candidate)
    assert forecast is not None
    assert forecast.itl is not None
    assert forecast.ttft is not None
    assert -0.6 < forecast.itl < -0.2  # weights split in two, all-reduces added
    assert forecast.ttft < 0


def test_fp8_weights_lower_the_itl_of_a_bf16_model() -> None:
    cl = command_line()
    running, candidate = engine(cl), engine(cl.with_value("quantization", "fp8"))
    calibration = model.calibrate(window_of(running), running)
    assert calibration is not None
    forecast = model.forecast(calibration, running, candidate)
    assert forecast is not None
    assert forecast.itl is not None
    assert forecast.itl < -0.15


def test_more_slots_shorten_a_queue_that_waits_for_them() -> None:
    cl = command_line("--max-num-seqs", "8")
    running, candidate = engine(cl), engine(cl.with_value("max-num-seqs", "32"))
    window = window_of(running, queue=2.0, running=8, waiting_mean=12.0, request_rate=4.0)
    calibration = model.calibrate(window, running)
    assert calibration is not None
    forecast = model.forecast(calibration, running, candidate)
    assert forecast is not None
    assert forecast.ttft is not None
    assert forecast.itl is not None
    assert forecast.ttft < -0.5
    assert forecast.itl > 0  # a larger batch decodes each token a little more slowly


def _open_loop_on_nearly_full_slots(config: EngineConfig, queue: float) -> Observation:
    """Poisson arrivals keeping 13 of 16 slots busy on average (Little's law sets the rate),
    fewer than one request waiting, ``queue`` seconds of queueing."""
    base = window_of(config, running=13)
    assert base.prefill_time_mean is not None
    assert base.itl_mean is not None
    slot_time = base.prefill_time_mean + 200 * base.itl_mean
    return window_of(config, running=13, queue=queue, waiting_mean=0.5, request_rate=13 / slot_time)


def test_doubling_nearly_full_slots_removes_most_of_an_open_loop_queue() -> None:
    """At 13 of 16 slots busy a queue comes and goes; at 13 of 32 a request seldom waits. The
    engine is read at the batch its slots allow (a continuous batch that keeps up is not a
    fully busy server), so twice the slots are twice its capacity: over half the queue goes.
    (Read at the batch it ran, the engine looked fully busy at any load it kept up with, and
    the forecast kept nine tenths of the queue: -9% TTFT where no queue at all is -68%.)"""
    cl = command_line("--max-num-seqs", "16")
    running, candidate = engine(cl), engine(cl.with_value("max-num-seqs", "32"))
    window = _open_loop_on_nearly_full_slots(running, queue=0.07)
    calibration = model.calibrate(window, running)
    assert calibration is not None
    assert not calibration.held
    forecast = model.forecast(calibration, running, candidate)
    assert forecast is not None
    assert forecast.ttft is not None
    assert window.ttft_mean is not None
    no_queue = -0.07 / window.ttft_mean
    assert no_queue <= forecast.ttft < no_queue / 2


@pytest.mark.parametrize("queue", [0.001, 0.07, 0.5])
def test_a_queue_for_slots_is_forecast_as_measured_on_the_running_configuration(
    queue: float,
) -> None:
    running = engine(command_line("--max-num-seqs", "16"))
    window = _open_loop_on_nearly_full_slots(running, queue=queue)
    calibration = model.calibrate(window, running)
    assert calibration is not None
    forecast = model.forecast(calibration, running, running)
    assert forecast is not None
    assert forecast.ttft == pytest.approx(0.0, abs=1e-6)


def test_without_a_queue_more_slots_leave_ttft_about_as_it_was() -> None:
    """A closed-loop client keeps the server busy without queueing: the model reads the
    utilisation from the measured queue, so no queue is forecast where none was."""
    cl = command_line("--max-num-seqs", "8")
    running, candidate = engine(cl), engine(cl.with_value("max-num-seqs", "32"))
    calibration = model.calibrate(window_of(running, queue=0.0), running)
    assert calibration is not None
    forecast = model.forecast(calibration, running, candidate)
    assert forecast is not None
    assert forecast.ttft is not None
    assert abs(forecast.ttft) < 0.1


def test_fewer_slots_than_the_requests_kept_running_queue_though_the_window_did_not() -> None:
    """60 requests running on 64 slots, none waiting: 32 slots cannot hold them, whatever the
    window's queue time said of the 64 it did not lack; 24 running fit in 32."""
    cl = command_line("--max-num-seqs", "64", "--max-model-len", "4096")
    running, fewer = engine(cl), engine(cl.with_value("max-num-seqs", "32"))
    for in_flight, full in ((60, True), (24, False)):
        window = window_of(running, running=in_flight, queue=0.0)
        calibration = model.calibrate(window, running)
        assert calibration is not None
        forecast = model.forecast(calibration, running, fewer)
        assert forecast is not None
        assert forecast.ttft is not None
        assert forecast.saturated is full, in_flight
        assert (forecast.ttft > 1.0) is full, (in_flight, forecast.ttft)


def test_a_single_user_gets_no_queue_from_a_slower_engine() -> None:
    cl = command_line("--tensor-parallel-size", "2")
    running, candidate = engine(cl, 2), engine(cl.with_value("tensor-parallel-size", "1"), 1)
    window = window_of(running, running=1, request_rate=0.4, queue=0.0)
    calibration = model.calibrate(window, running)
    assert calibration is not None
    forecast = model.forecast(calibration, running, candidate)
    assert forecast is not None
    assert forecast.ttft is not None
    assert forecast.ttft < 1.5  # slower prefill, but no queue out of nothing


def test_turning_the_prefix_cache_on_forecasts_no_ttft() -> None:
    """How much of the prompts is shared shows only once caching is on: no TTFT guess."""
    cl = command_line().with_flag("enable-prefix-caching", False)
    running, candidate = engine(cl), engine(cl.with_flag("enable-prefix-caching", True))
    calibration = model.calibrate(window_of(running), running)
    assert calibration is not None
    forecast = model.forecast(calibration, running, candidate)
    assert forecast is not None
    assert forecast.ttft is None
    assert forecast.e2e is None
    assert forecast.itl is not None


def test_a_model_the_performance_model_does_not_know_gets_no_forecast() -> None:
    cl = command_line(model="acme/unheard-of-13b")
    window = window_of(engine(command_line()))
    forecast = model.forecast_change(
        window, H100, (cl, 1), (cl.with_value("max-num-seqs", "64"), 1)
    )
    assert forecast is None


def test_an_unknown_gpu_gets_no_forecast() -> None:
    cl = command_line()
    window = window_of(engine(cl))
    forecast = model.forecast_change(
        window, HardwareInfo(), (cl, 1), (cl.with_value("max-num-seqs", "64"), 1)
    )
    assert forecast is None


def test_a_window_far_from_the_model_is_not_trusted_to_forecast() -> None:
    cl = command_line()
    running = engine(cl)
    calibration = model.calibrate(window_of(running, slow=10.0), running)
    assert calibration is not None
    assert not calibration.trusted
    assert (
        model.forecast(calibration, running, engine(cl.with_value("quantization", "fp8"))) is None
    )


def test_a_window_without_stage_times_cannot_be_calibrated() -> None:
    running = engine(command_line())
    assert model.calibrate(window_of(running, prefill_time_mean=None), running) is None


def test_smaller_prefill_chunks_lower_an_itl_tail_made_of_prefill_steps() -> None:
    """6,000-token prompts once a second: a few steps in a hundred also prefill, and they are
    the ITL p99 (read at about 100 ms). A smaller budget makes those steps shorter (the tail
    falls) for the same prefill work (the mean hardly moves)."""
    cl = command_line("--max-num-batched-tokens", "8192")
    running = engine(cl)
    smaller = engine(cl.with_value("max-num-batched-tokens", "1024"))
    window = window_of(running, prompt=6000, request_rate=1.0)
    window = window.model_copy(update={"itl": {99: 0.1}})
    tail = model.calibrate(window, running, itl_percentile=99)
    mean = model.calibrate(window, running)
    assert tail is not None
    assert mean is not None
    tail_forecast = model.forecast(tail, running, smaller)
    mean_forecast = model.forecast(mean, running, smaller)
    assert tail_forecast is not None
    assert mean_forecast is not None
    assert tail_forecast.itl is not None
    assert mean_forecast.itl is not None
    assert tail_forecast.itl < -0.3
    assert abs(mean_forecast.itl) < 0.15


def _p99_change(
    budget: str, to: str, *, prompt: int, rate: float, p99: float, running: int
) -> float:
    """The forecast change of ITL p99 from one batch budget to another on a window of
    ``prompt``-token prompts at ``rate`` that read the p99 at ``p99`` seconds."""
    cl = command_line("--max-num-batched-tokens", budget)
    current, candidate = engine(cl), engine(cl.with_value("max-num-batched-tokens", to))
    window = window_of(current, prompt=prompt, request_rate=rate, running=running)
    calibration = model.calibrate(
        window.model_copy(update={"itl": {99: p99}}), current, itl_percentile=99
    )
    assert calibration is not None
    forecast = model.forecast(calibration, current, candidate)
    assert forecast is not None
    assert forecast.itl is not None
    return forecast.itl


def test_a_tail_read_at_the_edge_of_the_prefilling_tokens_rises_with_more_of_them() -> None:
    """The same prompts, the p99 read at 28 ms: hardly more than one token in a hundred comes
    from a prefilling step (the p99 sits where the decode-only tokens end). Chunks of 1,024
    split each prompt into six steps, six times as many tokens wait behind a prefill, and the
    p99 is read among them: it rises (the simulator measured 10 -> 24 ms at half this rate)."""
    assert _p99_change("8192", "1024", prompt=6000, rate=1.0, p99=0.028, running=8) > 0.3


def test_a_tail_just_inside_the_prefilling_tokens_is_read_as_them_not_as_the_decodes() -> None:
    """6,000-token prompts 0.8 times a second: the model counts just under 1% of the tokens in
    prefilling steps, so at its own count the p99 would read 25 ms or less. The window read
    107 ms: a few more tokens prefill than it counts, and the p99 is among them. Chunks of
    2,048 shorten exactly those steps (the simulator, at 1.25 a second, measured 107 -> 46
    ms); reading the window as if the p99 came from decodes forecast it 1.8 times longer."""
    assert _p99_change("8192", "2048", prompt=6000, rate=0.8, p99=0.107, running=16) < -0.4


def _tail_change(
    budget: str,
    to: str,
    *,
    prompt: int,
    rate: float,
    running: int = 16,
    at: int = 99,
    over_mean: float | None = None,
    slow_itl: float = 1.0,
) -> float:
    """The forecast change of the ITL percentile ``at`` from one batch budget to another, on a
    window whose mean ITL is ``slow_itl`` times the decode steps' time (prefills stalling
    them) and that read the percentile at ``over_mean`` times that mean (None: where the
    model's steps read it, so the window agrees with the model at its calibrated scale)."""
    cl = command_line("--max-num-batched-tokens", budget)
    current, candidate = engine(cl), engine(cl.with_value("max-num-batched-tokens", to))
    window = window_of(current, prompt=prompt, request_rate=rate, running=running)
    window = window.model_copy(update={"itl_mean": slow_itl * (window.itl_mean or 0)})
    if over_mean is None:
        modelled = model.calibrate(window.model_copy(update={"itl": {at: 1.0}}), current, at)
        assert modelled is not None
        quantile = modelled.itl_readings[model.EDGE_POINTS.index((1.0, 1.0))]
    else:
        quantile = over_mean * (window.itl_mean or 0)
    window = window.model_copy(update={"itl": {at: quantile}})
    calibration = model.calibrate(window, current, itl_percentile=at)
    assert calibration is not None
    forecast = model.forecast(calibration, current, candidate)
    assert forecast is not None
    assert forecast.itl is not None
    return forecast.itl


def test_smaller_prefill_chunks_can_bring_prefill_steps_into_the_itl_p90() -> None:
    """The other side of the trade: at four 6,000-token prompts a second, chunks of 1,024
    tokens put a prefill chunk into so many steps that the p90 token comes from one."""
    change = _tail_change("8192", "1024", prompt=6000, rate=4.0, running=8, at=90, over_mean=1.2)
    assert change > 0.5


def test_prefill_steps_in_one_histogram_bucket_leave_the_itl_tail_reading_as_it_was() -> None:
    """2,000-token prompts three a second on 16 running: with a 1,024-token budget the steps
    that also prefill take about 24 ms, with 512 about 15 ms -- both in vLLM's 10-25 ms ITL
    bucket, where Prometheus interpolates by the share of tokens, not their time. Halving the
    budget doubles that share, so the p99 reading hardly falls (the steps' own time would
    have said -39%)."""
    cl = command_line("--max-num-batched-tokens", "1024")
    running = engine(cl)
    smaller = engine(cl.with_value("max-num-batched-tokens", "512"))
    window = window_of(running, prompt=2000, request_rate=3.0, running=16)
    window = window.model_copy(update={"itl": {99: 0.0224}})
    calibration = model.calibrate(window, running, itl_percentile=99)
    assert calibration is not None
    forecast = model.forecast(calibration, running, smaller)
    assert forecast is not None
    assert forecast.itl is not None
    assert -0.1 < forecast.itl < 0.2


def test_requests_in_flight_beyond_the_timed_batch_are_timed_as_that_batch() -> None:
    """A tenant's gauges can claim any number running (here with 1-token requests, so the KV
    cache would hold ~100,000): the model times at most ``MAX_BATCH`` a step, so a forecast
    stays cheap on the operator's loop whatever a window says."""
    running = engine(command_line("--max-num-seqs", "16384", "--max-num-batched-tokens", "16384"))
    tiny = {"prompt_tokens_mean": 1.0, "generation_tokens_mean": 1.0}
    claimed = window_of(running, **tiny).model_copy(update={"running_mean": 5e6})
    capped = window_of(running, **tiny).model_copy(update={"running_mean": float(MAX_BATCH)})
    over, at = model.calibrate(claimed, running), model.calibrate(capped, running)
    assert over is not None
    assert at is not None
    assert over.itl_factor == at.itl_factor


def test_a_window_value_that_is_not_a_number_gets_no_calibration() -> None:
    running = engine(command_line())
    for field in ("prompt_tokens_mean", "running_mean", "itl_mean"):
        window = window_of(running).model_copy(update={field: float("nan")})
        assert model.calibrate(window, running) is None, field


def test_an_itl_quantile_that_is_not_a_latency_moves_the_mean_instead() -> None:
    # A Prometheus the tenant names may answer anything for the ITL p99: no scale of the
    # model's steps can agree with it, so the forecast is the mean's, and nothing fails.
    cl = command_line("--max-num-batched-tokens", "8192")
    running, smaller = engine(cl), engine(cl.with_value("max-num-batched-tokens", "1024"))
    window = window_of(running, prompt=6000, request_rate=1.0)
    mean = model.calibrate(window, running)
    assert mean is not None
    expected = model.forecast(mean, running, smaller)
    assert expected is not None
    for reading in (-0.05, float("nan"), float("inf")):
        calibration = model.calibrate(window.model_copy(update={"itl": {99: reading}}), running, 99)
        assert calibration is not None
        assert calibration.itl_quantile_factor == 1.0
        assert model.forecast(calibration, running, smaller) == expected, reading


def _closed_loop(config: EngineConfig, **overrides: Any) -> Observation:
    """64 clients on 8 slots: 8 running, 56 waiting, a queue that does not grow."""
    fields: dict[str, Any] = {"queue": 5.0, "running": 8, "waiting_mean": 56.0}
    fields.update(overrides)
    return window_of(config, **fields)


def _after(window: Observation, running: EngineConfig, slots: int, latency: str) -> float:
    """The forecast change of ``latency`` ("ttft", "itl") with ``slots`` max-num-seqs."""
    cl = command_line("--max-num-seqs", "8").with_value("max-num-seqs", str(slots))
    calibration = model.calibrate(window, running)
    assert calibration is not None
    forecast = model.forecast(calibration, running, engine(cl))
    assert forecast is not None
    change: float | None = getattr(forecast, latency)
    assert change is not None
    return change


def _ttft_after(window: Observation, running: EngineConfig, slots: int) -> float:
    return _after(window, running, slots, "ttft")


def test_a_steady_queue_for_slots_keeps_waiting_until_the_slots_hold_every_request() -> None:
    """Clients that hold their requests in flight (a closed loop) keep 56 waiting on 8 slots:
    16 slots still leave 48 waiting, each for half the turnover, so a queue remains; 64 hold
    them all. (M/M/1 alone forecast 16 slots nearly queue-free.)"""
    running = engine(command_line("--max-num-seqs", "8"))
    window = _closed_loop(running)
    ttft = {slots: _ttft_after(window, running, slots) for slots in (8, 16, 32, 64)}
    assert ttft[8] == pytest.approx(0.0, abs=1e-6)
    assert -0.75 < ttft[16] < -0.3
    assert ttft[16] > ttft[32] > ttft[64]
    assert ttft[64] < -0.9


def test_a_growing_queue_is_not_read_as_clients_holding_their_requests() -> None:
    """A saturated window (the backlog grew by 200 in the window) is an open loop falling
    behind, not a fixed number of clients: its queue is the M/M/1 one, which more slots
    shorten more than a closed loop's."""
    running = engine(command_line("--max-num-seqs", "8"))
    steady = _closed_loop(running)
    growing = _closed_loop(running, waiting_delta=200.0, running_delta=0.0)
    calibration = model.calibrate(growing, running)
    assert calibration is not None
    assert not calibration.held
    assert _ttft_after(growing, running, 16) < _ttft_after(steady, running, 16)


def test_slots_queue_as_m_m_c_and_the_utilisation_is_read_back_from_the_queue() -> None:
    """Erlang C: one server is M/M/1 (s u / (1 - u)); two at half load wait s / 3 (M/M/2's
    s rho^2 / (1 - rho^2)); the calibration's inverse returns the utilisation it came from."""
    one = model._Server(service=1.0, servers=1, utilisation=0.8)
    assert model._wait(0.8, one, 60.0) == pytest.approx(4.0)
    two = model._Server(service=1.0, servers=2, utilisation=0.5)
    assert model._wait(0.5, two, 60.0) == pytest.approx(1 / 3)
    # Sixteen slots queue less than half as long as one server sixteen times as fast.
    sixteen = model._Server(service=1.6, servers=16, utilisation=0.8)
    one_fast = model._Server(service=0.1, servers=1, utilisation=0.8)
    assert model._wait(0.8, sixteen, 60.0) < model._wait(0.8, one_fast, 60.0) / 2
    for busy in (0.05, 0.5, 0.9, 0.97):
        queue = model._wait(busy, sixteen, 60.0)
        assert model._utilisation(queue, sixteen) == pytest.approx(busy, abs=1e-9)


def _itl_after(window: Observation, running: EngineConfig, slots: int) -> float:
    return _after(window, running, slots, "itl")


def test_clients_holding_their_requests_bring_more_prefills_to_more_slots() -> None:
    """A closed loop sends the next request as one returns: 64 slots turn its 64 requests over
    several times faster than 8, so several times as many prefills stall the decode steps, and
    ITL rises more than the same move under arrivals that keep their rate (a backlog that grows
    is an open loop falling behind)."""
    running = engine(command_line("--max-num-seqs", "8"))
    held = _closed_loop(running)
    open_loop = _closed_loop(running, waiting_delta=200.0, running_delta=0.0)
    closed, opened = _itl_after(held, running, 64), _itl_after(open_loop, running, 64)
    assert closed > opened + 0.05
    # Its own slots turn the requests over as measured: nothing to come back faster.
    assert _itl_after(held, running, 8) == pytest.approx(0.0, abs=1e-6)


def _with_more_ttft(
    window: Observation, running: EngineConfig, seconds: float
) -> tuple[Observation, model.Calibration]:
    """``window`` with ``seconds`` more mean TTFT than its queue and prefill explain, and the
    model calibrated on it."""
    assert window.ttft_mean is not None
    more = window.model_copy(update={"ttft_mean": window.ttft_mean + seconds})
    calibration = model.calibrate(more, running)
    assert calibration is not None
    return more, calibration


def test_ttft_beyond_a_lagging_queue_time_is_read_as_queue_while_requests_wait() -> None:
    """vLLM records queue time when a request finishes and TTFT at its first token, so while
    a queue builds TTFT holds more queueing than the queue-time histogram: here 10 s more, with
    56 waiting at 2 a second (Little's law: 28 s). Slots for every request remove that too;
    carried over as per-request overhead, they would have removed only the 5 s recorded."""
    running = engine(command_line("--max-num-seqs", "8"))
    lagging, calibration = _with_more_ttft(_closed_loop(running), running, 10.0)
    # All of the rest (10 s and the window's 10 ms) is within what Little's law allows.
    assert calibration.queue == pytest.approx(15.01)
    assert calibration.overhead == pytest.approx(0.0)
    assert _ttft_after(lagging, running, 64) < -0.9


def test_ttft_beyond_the_queue_and_prefill_stays_overhead_when_nothing_waits() -> None:
    """Half a second of TTFT outside the queue and the prefill with no request waiting is the
    server's per-request work (HTTP, tokenising): no number of slots removes it."""
    running = engine(command_line("--max-num-seqs", "8"))
    slow_front, calibration = _with_more_ttft(window_of(running), running, 0.5)
    assert calibration.queue == 0.0
    assert calibration.overhead == pytest.approx(0.51)
    assert _ttft_after(slow_front, running, 64) == pytest.approx(0.0, abs=0.02)


def test_a_tail_percentile_sees_a_prompts_full_chunks_not_their_mean_with_a_short_last_one() -> (
    None
):
    # 6,000-token prompts twice a second at a budget of 4,096 (less the 15 others' decodes): a
    # prompt takes a full step (92 ms) and a shorter one (52 ms), now and then beside the next
    # prompt's first chunk (a full step again). The p99 token comes from the full steps and
    # reads in vLLM's 75-100 ms ITL bucket.
    running = engine(command_line("--max-num-batched-tokens", "4096"))
    calibration = model.calibrate(
        window_of(running, prompt=6000, request_rate=2.0, running=16), running, itl_percentile=99
    )
    assert calibration is not None
    load = calibration.load
    stages = model._stages(CostModel(running), load, load.batch, 0.0)
    (full, _), (shared, shared_share), (last, last_share) = stages.mixed_parts
    assert full > 0.075 > last
    assert shared > 0.075
    assert last_share > shared_share  # at two prompts a second the next seldom waits
    assert 0.075 < stages.itl_at(99) <= 0.1


def test_a_prefill_chunk_gets_what_the_running_decodes_leave_of_the_budget() -> None:
    # 1,000-token prompts at a budget of 1,024: vLLM schedules the running requests' decode
    # tokens first, so beside 63 others a prompt takes a 961-token step and a 39-token one;
    # beside 7 it fits in one step.
    cl = command_line("--max-num-batched-tokens", "1024")
    running = engine(cl)

    def steps_beside(others: int) -> tuple[tuple[float, float], ...]:
        window = window_of(running, prompt=1000, request_rate=2.0, running=others + 1)
        calibration = model.calibrate(window, running)
        assert calibration is not None
        load = calibration.load
        return model._stages(CostModel(running), load, load.batch, 0.0).mixed_parts

    (full, full_share), (_, shared_share), (last, last_share) = steps_beside(63)
    assert abs(full_share - last_share) < 0.05
    assert shared_share < 0.1  # at two prompts a second the next one seldom waits
    assert last < full / 2  # 39 prompt tokens beside the decodes
    alone, *_ = steps_beside(7)
    assert alone[1] > 0.9  # one step a prompt, now and then beside a chunk of another


def test_a_prompts_last_chunk_shares_its_step_with_the_next_prompt_waiting() -> None:
    # 1,200-token prompts at a budget of 1,024 beside 15 decodes: 1,009 tokens, then 191.
    # vLLM fills the rest of the last chunk's step from the waiting prompts, so at 30 prompts a
    # second most prefilling steps carry a full budget (each about as long); at one a second
    # half of them are the short last chunk alone.
    cl = command_line("--max-num-batched-tokens", "1024")
    running = engine(cl)

    def full_budget_share(rate: float) -> float:
        window = window_of(running, prompt=1200, request_rate=rate, running=16)
        calibration = model.calibrate(window, running)
        assert calibration is not None
        load = calibration.load
        parts = model._stages(CostModel(running), load, load.batch, 0.0).mixed_parts
        longest = max(t for t, _ in parts)
        return sum(w for t, w in parts if t > 0.8 * longest)

    assert full_budget_share(30.0) > 0.7
    assert 0.45 < full_budget_share(1.0) < 0.55


def test_prompts_arriving_within_a_step_are_prefilled_together_up_to_the_budget() -> None:
    # Ten 1,200-token prompts a second: a step of a few tens of ms often sees another prompt
    # arrive, and vLLM fills the step's budget with it. 8,192 prefills both whole (2,400
    # tokens); 2,048 one whole and 848 tokens of the next, so it barely moves the tail;
    # 1,024 splits every prompt, and no step carries more than 1,024 tokens. (The simulator,
    # 16 running at 11 prompts a second: p99 -2% and -49%.)
    to_2048 = _tail_change("8192", "2048", prompt=1200, rate=10.0)
    to_1024 = _tail_change("8192", "1024", prompt=1200, rate=10.0)
    quiet = _tail_change("8192", "1024", prompt=1200, rate=0.2)
    assert to_1024 < -0.1
    assert to_1024 < quiet - 0.1
    assert abs(to_2048) < 0.15
    assert to_1024 < to_2048 - 0.2


def test_a_budget_caps_the_steps_where_three_or_more_prompts_arrive_together() -> None:
    # Forty 1,000-token prompts a second: more than one other prompt often arrives within a
    # step, and 8,192 prefills three or more at once; 2,048 holds two at most. So many prefills
    # stall most decode steps: the window's mean ITL is three times a decode step's.
    assert _tail_change("8192", "2048", prompt=1000, rate=40.0, slow_itl=3.0) < -0.3


def test_a_budget_that_holds_one_short_prompt_a_step_stalls_more_steps_not_fewer() -> None:
    # Nineteen 600-token prompts a second: 8,192 often prefills two or three in one step, 1,024
    # one a step. The same prompt tokens then stall more (shorter) steps, so the ITL p90, read
    # from the share of stalled tokens, does not fall (counting one prefilling step per prompt
    # whatever the budget read it 1-2% lower).
    assert _tail_change("8192", "1024", prompt=600, rate=18.7, at=90, running=16) > -0.05
    assert _tail_change("8192", "1024", prompt=600, rate=18.7, at=90, running=64) > -0.05


def test_a_window_a_little_slower_moves_the_tail_forecast_a_little() -> None:
    # 1,500-token prompts, 2048 -> 1024: the full chunks' steps sit near vLLM's 25 ms bucket
    # edge. Windows 1% apart in step time must not flip the forecast between "nothing" and
    # "half" as a step crossing the edge at one point would (the model knows its step times
    # up to a common factor, not where the edges fall among them). Each window reads its p99
    # at 21-26 ms, where the model's steps read it below the edge: the shorter chunks stay in
    # that bucket, and the reading hardly moves.
    cl = command_line("--max-num-batched-tokens", "2048")
    current, candidate = engine(cl), engine(cl.with_value("max-num-batched-tokens", "1024"))
    changes = []
    for slow in (0.9 + i / 100 for i in range(21)):
        window = window_of(current, prompt=1500, request_rate=6.0, running=10, slow=slow)
        window = window.model_copy(update={"itl": {99: 3.0 * (window.itl_mean or 0)}})
        calibration = model.calibrate(window, current, itl_percentile=99)
        assert calibration is not None
        forecast = model.forecast(calibration, current, candidate)
        assert forecast is not None
        assert forecast.itl is not None
        changes.append(forecast.itl)
    assert max(abs(b - a) for a, b in itertools.pairwise(changes)) < 0.1
    assert all(-0.2 < c < 0.0 for c in changes)


def test_the_window_s_tail_reading_says_which_side_of_a_bucket_edge_its_steps_fall() -> None:
    """2,000-token prompts, 1024 -> 512: at one common factor of the model's step times the
    prefilling steps read the p99 at 22 ms (below vLLM's 25 ms edge), at a slightly larger
    one at 46 ms. The mean ITL the steps are calibrated on cannot tell which; the window's p99
    can. Read at 43 ms, halving the chunks brings the tail under the edge (about -50%); read at
    22 ms, it stays in its bucket, and the reading hardly moves. Without the window's reading
    both would get one forecast (the scales of 0.86-1.16 this model once averaged over all
    read 22 ms: -2% for both)."""

    def change_read_at(p99: float) -> float:
        return _p99_change("1024", "512", prompt=2000, rate=3.0, p99=p99, running=16)

    assert change_read_at(0.043) < -0.4
    assert abs(change_read_at(0.022)) < 0.15


def test_a_negative_arrival_rate_from_a_hostile_source_gets_no_forecast_and_no_failure() -> None:
    # A Prometheus the tenant names may answer any number; the chance of a second prompt in a
    # step (1 - exp(-rate x step)) overflowed on a rate of -1e15. No forecast is made of it.
    cl = command_line("--max-num-batched-tokens", "8192")
    running = engine(cl)
    window = window_of(running, prompt=1200, request_rate=-1e15)
    calibration = model.calibrate(window, running, itl_percentile=99)
    assert calibration is not None
    smaller = engine(cl.with_value("max-num-batched-tokens", "2048"))
    assert model.forecast(calibration, running, smaller) is None


def _falling_behind(running: EngineConfig) -> Observation:
    """8 slots full while 250 requests arrived and 100 finished in two minutes: the waiting
    queue grew by 150. Those that finished recorded 2 s of queue; those still waiting will
    wait far longer."""
    return window_of(
        running,
        queue=2.0,
        requests=100,
        request_rate=100 / 120,
        waiting_mean=60.0,
        waiting_delta=150.0,
        running_delta=0.0,
    )


def test_a_server_finishing_fewer_requests_than_arrive_needs_capacity_for_all_of_them() -> None:
    """Arrivals 2.5 times the completions: the load runs 2.5 times past what the 8 slots
    serve, whatever the 2 s of queue time the finished ones recorded says. Twice the slots
    still fall behind (less far: a shorter backlog); four times keep up. (Read from the queue
    time alone, 16 slots were forecast to keep up.)"""
    running = engine(command_line("--max-num-seqs", "8"))
    window = _falling_behind(running)
    calibration = model.calibrate(window, running)
    assert calibration is not None
    forecasts = {
        slots: model.forecast(
            calibration, running, engine(command_line("--max-num-seqs", str(slots)))
        )
        for slots in (8, 16, 32)
    }
    same, twice, four = forecasts[8], forecasts[16], forecasts[32]
    assert same is not None
    assert twice is not None
    assert four is not None
    assert same.saturated
    assert same.ttft == pytest.approx(0.0, abs=1e-9)
    assert twice.saturated
    assert twice.ttft is not None
    assert -0.9 < twice.ttft < -0.3
    assert not four.saturated
    assert four.ttft is not None
    assert four.ttft < -0.95


def test_more_kv_room_runs_no_more_requests_than_max_num_seqs_allows() -> None:
    """A 32B at a 0.85 memory share whose window ran 31 requests on 32 slots, 32 more
    waiting: vLLM ran more than the full-length requests the model's KV estimate holds (13),
    and more room cannot take it past 32, so the queue stays. (Scaled by the window's 31 over
    the model's 13, more room was forecast to run 50 and cut TTFT by 93%.)"""
    cl = command_line(
        "--max-num-seqs", "32", "--gpu-memory-utilization", "0.85", "--max-model-len", "8192",
        model="Qwen/Qwen2.5-32B-Instruct",
    )  # fmt: skip
    running = engine(cl)
    calibration = model.calibrate(
        window_of(running, queue=5.0, running=31, waiting_mean=32.0), running
    )
    assert calibration is not None
    assert calibration.held
    assert calibration.slots < 20
    for share in ("0.88", "0.95"):
        roomier = engine(cl.with_value("gpu-memory-utilization", share))
        forecast = model.forecast(calibration, running, roomier)
        assert forecast is not None
        assert forecast.ttft is not None
        assert abs(forecast.ttft) < 0.1, share


def test_a_backlog_gauge_past_any_real_number_leaves_the_model_uncalibrated() -> None:
    """A pod's /metrics is the tenant's: a waiting gauge that grew by 1e308 over a day's
    window would make the backlog's wait infinite, and every forecast's change NaN. The
    model then says nothing (None), as for any series that is not a number."""
    running = engine(command_line("--max-num-seqs", "8"))
    hostile = _falling_behind(running).model_copy(
        update={"waiting_delta": 1e308, "window_seconds": 86400.0}
    )
    assert model.calibrate(hostile, running) is None
    assert model.calibrate(_falling_behind(running), running) is not None
