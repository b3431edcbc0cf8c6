"""Deployment problems are ruled out first: not vLLM, CPU offload, eager mode, no metrics,
too little traffic."""

from __future__ import annotations

from tests.unit.core.builders import H100, command_line, healthy, knobs, objectives, slow_decode

from latency_tuner.core.diagnosis import NotVllm, diagnose
from latency_tuner.core.evidence import Bottleneck, Finding
from latency_tuner.core.knobs import Change, KnobName, apply
from latency_tuner.core.observation import NoData
from latency_tuner.core.planner import Exhausted, plan

ITL_40MS = objectives(itl="40ms")


def test_a_container_that_is_not_vllm_is_a_finding_with_nothing_to_tune() -> None:
    d = diagnose(slow_decode(), ITL_40MS, NotVllm("python app.py"), H100, knobs())
    assert d.findings == (Finding.NOT_VLLM,)
    assert d.bottleneck is Bottleneck.NONE
    assert d.knobs == ()
    assert d.advice == ("serve the model with vLLM (python app.py)",)
    assert d.conclusions == ("the container is not a vLLM server: nothing to tune",)
    result = plan(d, slow_decode(), command_line(), knobs(), H100)
    assert result == Exhausted("the container is not a vLLM server", d.advice)


def test_cpu_offload_is_found_and_its_removal_is_tried_first() -> None:
    cl = command_line("--cpu-offload-gb", "10")
    window = slow_decode()
    d = diagnose(window, ITL_40MS, cl, H100, knobs())
    assert d.findings == (Finding.CPU_OFFLOAD,)
    assert d.evidence[0].signal == "cpu_offload_gb"
    assert "streams 10 GB of weights over PCIe" in d.evidence[0].text
    assert d.knobs[0] is KnobName.CPU_OFFLOAD
    assert any("quantized variant" in a for a in d.advice)
    change = plan(d, window, cl, knobs(), H100)
    assert isinstance(change, Change)
    assert (change.knob, change.from_value, change.to_value) == (KnobName.CPU_OFFLOAD, "10", None)
    assert change.reason.startswith("CpuOffload (a deployment problem) slows ITL p90")
    assert apply(change, cl).command_line.render() == (
        ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"],
        None,
    )


def test_enforce_eager_is_found_and_removing_it_is_a_safe_first_change() -> None:
    cl = command_line("--enforce-eager")
    window = slow_decode()
    d = diagnose(window, ITL_40MS, cl, H100, knobs())
    assert d.findings == (Finding.EAGER_MODE,)
    assert d.conclusions[0] == "CUDA graphs are off (--enforce-eager)"
    change = plan(d, window, cl, knobs(), H100)
    assert isinstance(change, Change)
    assert (change.knob, change.from_value, change.to_value) == (
        KnobName.ENFORCE_EAGER,
        "true",
        None,
    )
    assert change.knob_class.value == "safe"


def test_both_rule_outs_come_before_any_tuning_knob() -> None:
    cl = command_line("--enforce-eager", "--cpu-offload-gb", "4")
    d = diagnose(slow_decode(), ITL_40MS, cl, H100, knobs())
    assert d.knobs[:2] == (KnobName.CPU_OFFLOAD, KnobName.ENFORCE_EAGER)


def test_rule_outs_with_targets_met_are_advice_not_changes() -> None:
    cl = command_line("--enforce-eager")
    d = diagnose(healthy(), ITL_40MS, cl, H100, knobs())
    assert d.findings == (Finding.EAGER_MODE,)
    assert d.knobs == ()
    assert d.advice == ("targets are met; still, removing --enforce-eager would speed up decoding",)


def test_no_data_is_its_own_finding_and_keeps_the_fix_knobs() -> None:
    window = NoData(reason="no series match the selector", window_seconds=300)
    cl = command_line("--enforce-eager")
    d = diagnose(window, ITL_40MS, cl, H100, knobs())
    assert d.findings == (Finding.EAGER_MODE, Finding.NO_METRICS)
    assert d.bottleneck is Bottleneck.NONE
    assert d.knobs == (KnobName.ENFORCE_EAGER,)
    assert d.score is None
    assert "no data in the window: no series match the selector" in [e.text for e in d.evidence]
    assert "spec.metrics selects their series" in d.advice[0]


def test_too_few_requests_is_low_traffic_but_the_window_is_still_read() -> None:
    # Few requests, and mostly none in flight: a quiet server, not a slow one.
    window = slow_decode(requests=40, running_mean=0.5, waiting_mean=0.0)
    d = diagnose(window, ITL_40MS, command_line(), H100, knobs(), min_requests=100)
    assert d.findings == (Finding.LOW_TRAFFIC,)
    assert d.bottleneck is Bottleneck.DECODE_BANDWIDTH
    low = next(e for e in d.evidence if e.signal == "requests")
    assert (low.value, low.threshold, low.comparison) == (40.0, 100.0, "<")


def test_an_unknown_quantile_is_evidence_and_no_bottleneck() -> None:
    d = diagnose(healthy(itl={}), ITL_40MS, command_line(), H100, knobs())
    assert d.bottleneck is Bottleneck.NONE
    assert d.evidence[0].text == "ITL p90 unknown: no samples at that percentile in the window"
    assert d.conclusions == ()


def test_low_traffic_with_targets_met_gives_no_advice() -> None:
    quiet = healthy(requests=40, running_mean=0.5, waiting_mean=0.0)
    d = diagnose(quiet, ITL_40MS, command_line(), H100, knobs(), min_requests=100)
    assert d.findings == (Finding.LOW_TRAFFIC,)
    assert d.advice == ()
    assert d.conclusions == ("too few requests in the window to judge",)
