"""The compute dtype the real engine gives vLLM (``cpu_compute_dtype``) is the one torch, in the
vLLM venv, says this CPU computes natively: bfloat16 where oneDNN supports it, float32 where
bfloat16 would be emulated (50x slower per matrix product on an AVX2-only CPU seen here, which
made every real-engine TTFT target unreachable)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from latency_tuner.realengine.server import cpu_compute_dtype
from latency_tuner.realengine.venv import child_env

pytestmark = pytest.mark.realengine

TORCH_ASKS_ONEDNN = "import torch; print(torch.ops.mkldnn._is_mkldnn_bf16_supported())"


def test_the_dtype_picked_from_cpuinfo_is_the_one_torch_computes_natively_here(
    vllm_py: Path,
) -> None:
    answer = subprocess.run(
        [str(vllm_py), "-c", TORCH_ASKS_ONEDNN],
        capture_output=True, text=True, env=child_env(), timeout=120, check=True,
    ).stdout.split()[-1]  # fmt: skip
    assert cpu_compute_dtype() == ("bfloat16" if answer == "True" else "float32")
