"""The allowed space around a running configuration: one dimension per knob the spec lets the
operator move, each naming the running value, rungs within the spec's bounds, and every
combination once (the benchmark's baselines search it and the planner forecasts it)."""

from __future__ import annotations

import pytest
from tests.unit.core.builders import H100, command_line, knobs

from latency_tuner.core import space
from latency_tuner.core.hardware import HardwareInfo

RUNNING = command_line("--max-num-seqs", "48", "--no-enable-chunked-prefill")
SPEC = knobs(
    max_num_seqs={"min": 16, "max": 128},
    max_num_batched_tokens=None,
    prefix_caching=False,
    chunked_prefill=True,
    gpu_memory_utilization=None,
    kv_cache_dtype=["fp8"],
)


def test_each_dimension_names_the_running_value_among_its_values() -> None:
    dims = {d.knob: d for d in space.dimensions(SPEC, RUNNING, H100, 1)}
    assert set(dims) == {"kvCacheDtype", "chunkedPrefill", "maxNumSeqs"}
    assert dims["maxNumSeqs"].start == "48"
    assert dims["maxNumSeqs"].values == ("16", "32", "48", "64", "128")  # the ladder, and 48
    assert dims["chunkedPrefill"].start == "false"
    assert dims["kvCacheDtype"].start == "auto"
    assert all(d.start in d.values for d in dims.values())


def test_every_combination_comes_once_with_the_command_line_it_makes() -> None:
    dims = space.dimensions(SPEC, RUNNING, H100, 1)
    points = list(space.settings(dims, space.Setting(RUNNING, None, 1)))
    assert len(points) == space.size(dims) == 2 * 2 * 5
    assert len({values for values, _ in points}) == len(points)
    values, setting = points[-1]
    assert dict(values) == {"kvCacheDtype": "fp8", "chunkedPrefill": "true", "maxNumSeqs": "128"}
    assert setting.cl.get("kv-cache-dtype") == "fp8"
    assert setting.cl.get("max-num-seqs") == "128"
    assert setting.cl.flag_enabled("enable-chunked-prefill") is True


def test_tensor_parallelism_over_pcie_is_left_out_unless_forced() -> None:
    pcie = HardwareInfo(gpu_product="H100-SXM", interconnect="PCIe", gpus_per_node=8)
    allowed = knobs(tensor_parallel={"maxSize": 4})
    forced = knobs(tensor_parallel={"maxSize": 4, "force": True})
    assert "tensorParallel" not in {d.knob for d in space.dimensions(allowed, RUNNING, pcie, 1)}
    sizes = {d.knob: d for d in space.dimensions(forced, RUNNING, pcie, 1)}["tensorParallel"]
    assert sizes.values == ("1", "2", "4")


def test_a_gpu_count_that_is_not_the_tensor_parallel_size_is_refused() -> None:
    with pytest.raises(space.SpaceError):
        space.dimensions(SPEC, RUNNING, H100, 2)
