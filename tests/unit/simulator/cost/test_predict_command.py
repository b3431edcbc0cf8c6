"""`latency-tuner sim predict` prints the model's TTFT and ITL."""

from __future__ import annotations

import json

import pytest

from latency_tuner.simulator.predict import main_predict


def test_predict_prints_ttft_and_itl_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--model", "meta-llama/Llama-3.1-8B-Instruct", "--sim-gpu", "h100_sxm",
        "--prompt-tokens", "2048", "--output-tokens", "128", "--batch", "1", "--json",
    ]  # fmt: skip
    assert main_predict(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"ttft_ms", "itl_ms"}
    assert 45 < result["ttft_ms"] < 65  # ~42 ms of kernels + host and server time
    assert 5 < result["itl_ms"] < 8


def test_predict_takes_tp_quantization_and_kv_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--model", "meta-llama/Llama-3.1-70B-Instruct", "--sim-gpu", "H100-SXM",
        "--tensor-parallel-size", "4", "--quantization", "fp8", "--kv-cache-dtype", "fp8",
        "--prompt-tokens", "1024", "--output-tokens", "256", "--batch", "8", "--json",
    ]  # fmt: skip
    assert main_predict(argv) == 0
    assert json.loads(capsys.readouterr().out)["itl_ms"] < 14


def test_predict_without_json_prints_a_readable_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--sim-gpu", "L40S"]
    assert main_predict([*argv, "--prompt-tokens", "512", "--output-tokens", "64"]) == 0
    assert capsys.readouterr().out.startswith("TTFT ")


def test_predict_reports_a_startup_error_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--model", "meta-llama/Llama-3.1-70B-Instruct", "--sim-gpu", "H100-SXM",
        "--prompt-tokens", "512", "--output-tokens", "64",
    ]  # fmt: skip
    assert main_predict(argv) == 1
    assert "GiB of weights per GPU" in capsys.readouterr().err
