"""A tensor-parallel all-reduce costs its latency plus the ring's bytes over the slowest link
(reference/effect_sizes.md: NVLink 11-20 us at 0.5 MB on H100; L40S over PCIe 1.7 ms at TP2 and
39 ms at TP8 for a 33.5 MB prefill message, 50-500 us for small ones)."""

from __future__ import annotations

import pytest

from latency_tuner.hardware import get_gpu
from latency_tuner.perf.collectives import allreduce_seconds

PREFILL_70B_2048 = 2048 * 8192 * 2.0  # 33.5 MB: hidden states of a 2048-token 70B chunk
DECODE_70B = 8192 * 2.0  # 16 KB: one decoding sequence


def test_one_gpu_needs_no_all_reduce() -> None:
    assert allreduce_seconds(PREFILL_70B_2048, 1, get_gpu("L40S")) == 0.0


@pytest.mark.parametrize(("tp", "published_ms"), [(2, 1.7), (8, 39.0)])
def test_a_large_message_over_pcie_costs_what_its_bytes_cost(tp: int, published_ms: float) -> None:
    got = allreduce_seconds(PREFILL_70B_2048, tp, get_gpu("L40S")) * 1e3
    assert got == pytest.approx(published_ms, rel=0.25)


def test_over_pcie_the_ring_slows_down_as_it_leaves_the_switch_and_the_socket() -> None:
    l40s = get_gpu("L40S")
    per_byte = [allreduce_seconds(PREFILL_70B_2048, tp, l40s) for tp in (2, 4, 8)]
    assert per_byte[0] * 3 < per_byte[1] < per_byte[2] / 1.5


def test_a_small_decode_message_over_pcie_is_latency_bound_at_any_tp() -> None:
    l40s = get_gpu("L40S")
    for tp in (2, 4, 8):
        assert 10e-6 <= allreduce_seconds(DECODE_70B, tp, l40s) <= 60e-6


def test_over_nvlink_the_ring_moves_2_n_minus_1_over_n_of_the_message() -> None:
    h100 = get_gpu("H100-SXM")
    big = 1e9  # bandwidth term dominates
    tp2, tp8 = allreduce_seconds(big, 2, h100), allreduce_seconds(big, 8, h100)
    assert tp8 / tp2 == pytest.approx((2 * 7 / 8) / (2 * 1 / 2), rel=0.01)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_half_a_megabyte_over_nvlink_takes_11_to_20_microseconds(tp: int) -> None:
    assert 9e-6 <= allreduce_seconds(0.5e6, tp, get_gpu("H100-SXM")) <= 22e-6


def test_nvlink_bridged_pairs_fall_back_to_the_host_beyond_the_pair() -> None:
    nvl = get_gpu("H100-NVL")
    assert allreduce_seconds(PREFILL_70B_2048, 4, nvl) > 10 * allreduce_seconds(
        PREFILL_70B_2048, 2, nvl
    )
