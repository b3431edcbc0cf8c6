"""The real engine behind the pod runner's seam, without starting vLLM: what a container's
vLLM command line becomes (``RealVllmEngine.command``), and what ``latency-tuner demo --engine
vllm`` says when the vLLM venv is not there. (Real vLLM pods running in the sandbox are the
real-engine tier's: tests/realengine.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from latency_tuner.cli import demo
from latency_tuner.realengine.server import ENTRYPOINT, cpu_compute_dtype
from latency_tuner.sandbox.podrunner import RealVllmEngine

PYTHON, MODEL_DIR = Path("/venv/bin/python"), Path("/cache/tiny-llama")


def test_a_container_runs_as_real_vllm_serving_the_tiny_model_under_its_model_name() -> None:
    container = {
        "command": ["vllm", "serve"],
        "args": ["$(MODEL)", "-O0", "--max-num-seqs", "4", "--port", "8000", "--host=0.0.0.0"],
        "env": [{"name": "MODEL", "value": "org/chat-model"}],
    }
    engine = RealVllmEngine(python=PYTHON, model_dir=MODEL_DIR, dtype="float32")

    command = engine.command(container, port=4321, gpu="H100-SXM", gpus=1)

    assert command.program == (str(PYTHON), "-m", ENTRYPOINT)
    assert command.args == (
        "--model", str(MODEL_DIR), "--served-model-name", "org/chat-model",
        "--optimization-level=0", "--max-num-seqs=4", "--dtype=float32",
        "--host", "127.0.0.1", "--port", "4321",
    )  # fmt: skip
    assert command.env["HF_HUB_OFFLINE"] == "1"  # never the model hub
    assert command.env["VLLM_CPU_KVCACHE_SPACE"]  # a KV cache sized for a shared machine


def test_served_model_names_pass_through_and_flags_vllm_may_refuse_are_kept_as_written() -> None:
    container = {
        "args": [
            "org/chat-model",
            "--served-model-name",
            "chat",
            "alias",
            "--quantization",
            "awq",
            "--no-enable-prefix-caching",
        ]
    }
    engine = RealVllmEngine(python=PYTHON, model_dir=MODEL_DIR)

    args = list(engine.command(container, port=1, gpu="L40S", gpus=1).args)

    assert args[:6] == ["--model", str(MODEL_DIR), "--served-model-name", "chat", "alias",
                        "--quantization=awq"]  # fmt: skip
    assert "--no-enable-prefix-caching" in args
    assert args.count("--served-model-name") == 1


def test_a_dtype_the_container_names_is_kept_over_the_one_the_engine_picks() -> None:
    engine = RealVllmEngine(python=PYTHON, model_dir=MODEL_DIR, dtype="float32")

    for written in (["m", "--dtype", "half"], ["m", "--dtype=half"]):
        args = list(engine.command({"args": written}, port=1, gpu="L40S", gpus=1).args)
        assert [a for a in args if a.startswith("--dtype")] == ["--dtype=half"]


@pytest.mark.parametrize(
    ("flags", "dtype"),
    [
        # AVX2 only (an EPYC seen here): bfloat16 is emulated, 50x slower than float32.
        ("fpu sse4_2 fma avx avx2 f16c", "float32"),
        # The AVX-512 core set: oneDNN computes bfloat16 with it.
        ("avx2 avx512f avx512dq avx512bw avx512vl", "bfloat16"),
        ("avx2 avx512f avx512bw", "float32"),  # not the whole core set
        ("avx2 amx_bf16 amx_tile", "bfloat16"),
    ],
)
def test_the_compute_dtype_is_bfloat16_only_where_the_cpu_computes_it_natively(
    flags: str, dtype: str
) -> None:
    assert cpu_compute_dtype(f"processor : 0\nflags : {flags}\n") == dtype


def test_aarch64_with_the_bf16_feature_computes_bfloat16_and_without_it_float32() -> None:
    assert cpu_compute_dtype("Features : fp asimd bf16 i8mm\n") == "bfloat16"
    assert cpu_compute_dtype("Features : fp asimd\n") == "float32"


def test_a_container_that_is_not_vllm_is_refused_by_the_real_engine_too() -> None:
    engine = RealVllmEngine(python=PYTHON, model_dir=MODEL_DIR)
    with pytest.raises(ValueError, match="model"):
        engine.command({"command": ["vllm", "serve"], "args": []}, port=1, gpu="L40S", gpus=1)


def test_demo_on_the_real_engine_without_its_venv_names_the_script_that_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LATENCY_TUNER_VLLM_PYTHON", raising=False)
    monkeypatch.setenv("LATENCY_TUNER_VLLM_VENV", str(tmp_path / "no-venv-here"))

    code = demo.main(["--engine", "vllm", "--report", str(tmp_path / "report")])

    assert code == 2
    error = capsys.readouterr().err
    assert "real vLLM is not installed" in error
    assert "scripts/setup-vllm.sh" in error
    assert not (tmp_path / "report").exists()  # nothing started
