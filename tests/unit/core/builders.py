"""Hand-built inputs for the decision core: windows, objectives, command lines, hardware."""

from __future__ import annotations

from typing import Any

from latency_tuner.api.spec import Knobs, Objective, Objectives
from latency_tuner.core import model, reach
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.observation import Observation
from latency_tuner.perf.config import EngineConfig
from latency_tuner.perf.cost import CostModel
from latency_tuner.vllm.args import VllmCommandLine

H100 = HardwareInfo.from_labels("NVIDIA-H100-80GB-HBM3", gpus_per_node=8)
A100 = HardwareInfo.from_labels("NVIDIA-A100-SXM4-80GB", gpus_per_node=8)
L40S = HardwareInfo.from_labels("NVIDIA-L40S", gpus_per_node=4)


def objectives(
    ttft: str | None = None, itl: str | None = None, e2e: str | None = None, percentile: int = 90
) -> Objectives:
    """Objectives at one percentile: ``objectives(ttft="500ms", itl="50ms")``."""

    def one(threshold: str | None) -> Objective | None:
        if threshold is None:
            return None
        return Objective.model_validate({"percentile": percentile, "threshold": threshold})

    return Objectives(ttft=one(ttft), itl=one(itl), e2e=one(e2e))


def command_line(*flags: str, model: str = "meta-llama/Llama-3.1-8B-Instruct") -> VllmCommandLine:
    """``vllm serve MODEL`` with ``flags``."""
    return VllmCommandLine.parse(["vllm", "serve", model, *flags], None)


def knobs(**fields: Any) -> Knobs:
    """Knobs from camelCase or snake_case fields, validated like a spec."""
    return Knobs.model_validate(fields)


def healthy(**overrides: Any) -> Observation:
    """A busy, well-behaved window on one pod: 600 requests in 5 minutes, short prompts, no
    queueing, no preemptions. Override what a scenario needs."""
    fields: dict[str, Any] = {
        "window_seconds": 300.0,
        "requests": 600,
        "pods": 1,
        "ttft": {50: 0.12, 90: 0.20, 99: 0.30},
        "itl": {50: 0.020, 90: 0.025, 99: 0.030},
        "e2e": {50: 4.0, 90: 5.0, 99: 6.0},
        "ttft_mean": 0.14,
        "itl_mean": 0.021,
        "queue_time_mean": 0.01,
        "prefill_time_mean": 0.12,
        "decode_time_mean": 4.0,
        "request_rate": 2.0,
        "prompt_tokens_mean": 500.0,
        "generation_tokens_mean": 200.0,
        "running_mean": 8.0,
        "running_max": 14.0,
        "waiting_mean": 0.0,
        "waiting_max": 0.0,
        "kv_cache_usage_mean": 0.3,
        "kv_cache_usage_max": 0.5,
        "prefix_cache_hit_rate": 0.5,
        "preemptions": 0.0,
    }
    fields.update(overrides)
    return Observation(**fields)


def queueing(**overrides: Any) -> Observation:
    """TTFT mostly spent waiting: queue 0.61 s of 0.85 s, 256 running (at the default
    max-num-seqs of a small GPU), 12 waiting at 20 requests/s (Little's law: 0.6 s)."""
    fields: dict[str, Any] = {
        "request_rate": 20.0,
        "requests": 6000,
        "ttft": {50: 0.7, 90: 0.85, 99: 1.2},
        "ttft_mean": 0.85,
        "queue_time_mean": 0.61,
        "prefill_time_mean": 0.22,
        "running_mean": 250.0,
        "running_max": 256.0,
        "waiting_mean": 12.0,
        "waiting_max": 30.0,
        "kv_cache_usage_mean": 0.6,
        "kv_cache_usage_max": 0.7,
    }
    return healthy(**{**fields, **overrides})


def long_prefill(**overrides: Any) -> Observation:
    """TTFT is prefill: 6100-token prompts, little queueing."""
    fields: dict[str, Any] = {
        "ttft": {50: 0.8, 90: 1.1, 99: 1.5},
        "ttft_mean": 0.85,
        "queue_time_mean": 0.05,
        "prefill_time_mean": 0.78,
        "prompt_tokens_mean": 6100.0,
        "running_mean": 6.0,
        "running_max": 12.0,
    }
    return healthy(**{**fields, **overrides})


def slow_decode(**overrides: Any) -> Observation:
    """ITL high even with two requests running: memory-bandwidth bound."""
    fields: dict[str, Any] = {
        "itl": {50: 0.060, 90: 0.065, 99: 0.075},
        "itl_mean": 0.061,
        "running_mean": 2.0,
        "running_max": 4.0,
        "request_rate": 0.2,
    }
    return healthy(**{**fields, **overrides})


def interference(**overrides: Any) -> Observation:
    """Median ITL fine, p99 6x higher, 4000-token prompts arriving under concurrency."""
    fields: dict[str, Any] = {
        "itl": {50: 0.025, 90: 0.09, 99: 0.15},
        "itl_mean": 0.035,
        "prompt_tokens_mean": 4000.0,
        "running_mean": 24.0,
        "running_max": 40.0,
    }
    return healthy(**{**fields, **overrides})


def kv_pressure(**overrides: Any) -> Observation:
    """30 preemptions in 600 requests, KV nearly full."""
    fields: dict[str, Any] = {
        "ttft": {50: 0.3, 90: 0.9, 99: 3.0},
        "ttft_mean": 0.5,
        "preemptions": 30.0,
        "kv_cache_usage_mean": 0.93,
        "kv_cache_usage_max": 1.0,
        "running_mean": 60.0,
        "running_max": 90.0,
        "waiting_mean": 2.0,
    }
    return healthy(**{**fields, **overrides})


def prefill_stalls(**overrides: Any) -> Observation:
    """Llama 3.1 8B on an H100 with chunked prefill off: 6,000-token prompts at 3 a second
    stall the decodes of the others for a whole prefill step, so ITL p99 (136 ms) is 17 times
    the median. A window the calibrated performance model fits (``core.model``)."""
    fields: dict[str, Any] = {
        "request_rate": 3.0,
        "prompt_tokens_mean": 6000.0,
        "generation_tokens_mean": 128.0,
        "running_mean": 5.5,
        "running_max": 10.0,
        "ttft": {50: 0.35, 90: 0.45, 99: 0.6},
        "ttft_mean": 0.38,
        "queue_time_mean": 0.02,
        "prefill_time_mean": 0.34,
        "itl": {50: 0.008, 90: 0.012, 99: 0.136},
        "itl_mean": 0.018,
        "e2e": {50: 1.5, 90: 2.0, 99: 2.5},
        "decode_time_mean": 1.2,
        "prefix_cache_hit_rate": 0.0,
    }
    return healthy(**{**fields, **overrides})


def window_of(config: EngineConfig, **overrides: Any) -> Observation:
    """A window measured on ``config``: its ITL and prefill times what the roofline gives
    (times ``slow``, default 1), 8 requests running, ``queue`` seconds of queueing."""
    slow = overrides.pop("slow", 1.0)
    queue = overrides.pop("queue", 0.0)
    prompt, output, running = overrides.pop("prompt", 1000), 200, overrides.pop("running", 8)
    cost = CostModel(config)
    step = cost.step_time(decode_contexts=[prompt + output // 2] * running, prefill_chunks=[])
    prefill = cost.step_time(decode_contexts=[prompt] * (running - 1), prefill_chunks=[(prompt, 0)])
    itl, prefill = step * slow, prefill * slow
    fields: dict[str, Any] = {
        "window_seconds": 120.0,
        "requests": 240,
        "pods": 1,
        "ttft_mean": 0.01 + queue + prefill,
        "itl_mean": itl,
        "queue_time_mean": queue,
        "prefill_time_mean": prefill,
        "request_rate": 2.0,
        "prompt_tokens_mean": float(prompt),
        "generation_tokens_mean": float(output),
        "running_mean": float(running),
        "waiting_mean": 0.0,
    }
    fields.update(overrides)
    return Observation(**fields)


def with_spread(window: Observation, **overrides: Any) -> Observation:
    """``window`` with percentiles spread around its means as a real window's are (ITL p90 5%
    and TTFT p90 20% over the mean), and ``overrides``."""
    itl, ttft = window.itl_mean, window.ttft_mean
    assert itl is not None
    assert ttft is not None
    fields: dict[str, Any] = {
        "itl": {50: itl, 90: itl * 1.05, 99: itl * 1.1},
        "ttft": {50: ttft, 90: ttft * 1.2, 99: ttft * 1.5},
    }
    return window.model_copy(update={**fields, **overrides})


def cheapest_way(
    window: Observation,
    goal: Objectives,
    cl: VllmCommandLine,
    spec: Knobs,
    hardware: HardwareInfo = H100,
) -> reach.Way | None:
    """``reach.cheapest_way`` on ``window`` of ``cl``, as the planner asks it: the model
    calibrated at the ITL objective's percentile, the window diagnosed against ``goal``."""
    running = model.engine_config(cl, None, hardware)
    assert running is not None
    itl = goal.itl.percentile if goal.itl is not None else None
    calibration = model.calibrate(window, running, itl)
    assert calibration is not None
    d = diagnose(window, goal, cl, hardware, spec)
    assert d.score is not None
    fit = reach.Fitted(window, d.causes, d.score, calibration, running, cl, spec, hardware)
    return reach.cheapest_way(fit)
