"""A change the diagnosis asks for on two objectives carries its expected effect on each, so
the trial can record and later score both (issue 12)."""

from __future__ import annotations

from tests.unit.core.builders import (
    H100,
    command_line,
    knobs,
    long_prefill,
    objectives,
    queueing,
)

from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.knobs import Change, KnobName
from latency_tuner.core.planner import plan

BOTH = objectives(ttft="500ms", itl="20ms")
CL = command_line("--gpu-memory-utilization", "0.95", "--enable-prefix-caching")
FP8 = {"variants": [{"name": "fp8", "model": "org/model-FP8"}]}
NO_SAFE = {"max_num_seqs": None, "max_num_batched_tokens": None, "gpu_memory_utilization": None}


def test_fp8_weights_for_a_slow_prefill_and_a_slow_decode_expect_a_gain_on_both() -> None:
    window = long_prefill(itl={50: 0.03, 90: 0.04, 95: 0.045, 99: 0.05})
    spec = knobs(quantization=FP8, **NO_SAFE)
    d = diagnose(window, BOTH, CL, H100, spec)
    assert {c.objective for c in d.causes} == {"ttft", "itl"}
    change = plan(d, window, CL, spec, H100)
    assert isinstance(change, Change), change
    assert change.knob is KnobName.QUANTIZATION
    expected = dict(change.expected)
    assert set(expected) == {"ttft", "itl"}
    assert all(0.0 < gain < 1.0 for gain in expected.values())
    # The most violated objective first, as the reason names it.
    assert change.expected[0][0] == d.causes[0].objective


def test_a_change_for_one_objective_expects_nothing_of_the_others() -> None:
    window = queueing()
    d = diagnose(window, objectives(ttft="500ms"), CL, H100, knobs())
    change = plan(d, window, CL, knobs(), H100)
    assert isinstance(change, Change), change
    assert [objective for objective, _ in change.expected] == ["ttft"]
