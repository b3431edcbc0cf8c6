from __future__ import annotations

import pytest

from latency_tuner.cli.sim import UsageError, main, parse_command_line, split_sim_options
from latency_tuner.vllm.metrics import MetricsVersion

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_sim_options_are_taken_out_and_the_rest_is_left_in_order() -> None:
    options, rest = split_sim_options(
        [MODEL, "--sim-gpu", "L40S", "--max-num-seqs", "8", "--sim-gpus=2", "--sim-seed", "5",
         "--sim-metrics-version", "legacy", "--sim-spec-acceptance", "0.5"]
    )  # fmt: skip
    assert rest == [MODEL, "--max-num-seqs", "8"]
    assert (options.gpu, options.gpus, options.seed) == ("L40S", 2, 5)
    assert options.metrics_version is MetricsVersion.LEGACY
    assert options.spec_acceptance == 0.5


@pytest.mark.parametrize(
    "argv",
    [
        ["--sim-gpuz", "H100"],
        ["--sim-gpus", "zero"],
        ["--sim-metrics-version", "v2"],
        ["--sim-seed"],
    ],
)
def test_a_wrong_sim_option_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(UsageError):
        split_sim_options([MODEL, *argv])


@pytest.mark.parametrize(
    "rest",
    [
        ["serve", MODEL, "--port", "9000"],
        ["vllm", "serve", MODEL, "--port", "9000"],
        [MODEL, "--port", "9000"],
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL, "--port", "9000"],
    ],
)
def test_every_vllm_launch_shape_is_understood(rest: list[str]) -> None:
    cl = parse_command_line(rest)
    assert cl.model == MODEL
    assert cl.get("port") == "9000"


def test_a_startup_error_exits_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([MODEL, "--tensor-parallel-size", "4", "--sim-gpus", "2"]) == 1
    assert "larger than the number of available GPUs (2)" in capsys.readouterr().err


def test_predict_is_routed_to_the_predictor(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--model",
        MODEL,
        "--sim-gpu",
        "H100-SXM",
        "--prompt-tokens",
        "100",
        "--output-tokens",
        "10",
    ]
    assert main(["predict", *argv]) == 0
    assert "ITL" in capsys.readouterr().out
