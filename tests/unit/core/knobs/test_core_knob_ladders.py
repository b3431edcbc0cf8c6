"""Numeric knobs move one rung at a time within the spec's bounds (and list the rungs beyond,
for a jump the calibrated model asks for)."""

from __future__ import annotations

from latency_tuner.api.spec import IntRange
from latency_tuner.core.knobs import (
    BATCHED_TOKENS_LADDER,
    MAX_NUM_SEQS_LADDER,
    ladder_in,
    next_gpu_memory_utilization,
    next_rung,
    rungs_beyond,
)


def test_the_batched_tokens_ladder_within_default_bounds() -> None:
    rungs = ladder_in(BATCHED_TOKENS_LADDER, IntRange(min=512, max=16384))
    assert rungs == (512, 1024, 2048, 4096, 8192, 16384)


def test_bounds_off_the_ladder_become_its_end_rungs() -> None:
    rungs = ladder_in(MAX_NUM_SEQS_LADDER, IntRange(min=24, max=300))
    assert rungs == (24, 32, 64, 128, 256, 300)


def test_next_rung_moves_to_the_neighbour_in_the_asked_direction() -> None:
    rungs = (512, 1024, 2048, 4096)
    assert next_rung(rungs, 1024, +1) == 2048
    assert next_rung(rungs, 1024, -1) == 512
    assert next_rung(rungs, 3000, +1) == 4096  # a value between rungs goes to the next one
    assert next_rung(rungs, 3000, -1) == 2048
    assert next_rung(rungs, 4096, +1) is None
    assert next_rung(rungs, 512, -1) is None
    assert next_rung(rungs, 9000, -1) == 4096  # above the bound: back inside it


def test_gpu_memory_steps_up_by_three_points_and_stops_at_the_ceiling() -> None:
    assert next_gpu_memory_utilization(0.85, 0.95) == 0.88
    assert next_gpu_memory_utilization(0.92, 0.95) == 0.95
    assert next_gpu_memory_utilization(0.95, 0.95) is None
    assert next_gpu_memory_utilization(0.97, 0.95) is None


def test_the_rungs_beyond_a_step_stay_within_the_bounds_nearest_first() -> None:
    bounds = IntRange(min=8, max=100)
    assert rungs_beyond(MAX_NUM_SEQS_LADDER, bounds, 16, +1, 3) == (32, 64, 100)
    assert rungs_beyond(MAX_NUM_SEQS_LADDER, bounds, 64, +1, 3) == (100,)
    assert rungs_beyond(MAX_NUM_SEQS_LADDER, bounds, 32, -1, 3) == (16, 8)
    assert rungs_beyond(MAX_NUM_SEQS_LADDER, bounds, 100, +1, 3) == ()
