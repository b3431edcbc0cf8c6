"""`latency-tuner sim --help` explains its own options, with defaults and the GPUs it knows."""

from __future__ import annotations

import pytest

from latency_tuner.cli import sim
from latency_tuner.hardware import GPUS


def test_sim_help_lists_its_options_their_defaults_and_every_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert sim.main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--sim-gpu GPU GPU to simulate (default H100-SXM)" in text
    assert "--sim-gpus N GPUs in the pod (default 1)" in text
    assert "latency-tuner sim predict --help" in text
    for gpu in GPUS:
        assert gpu in text
    assert ".py" not in text  # points at commands, never at source files
