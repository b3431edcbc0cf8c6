"""Containers that do not run vLLM's server are refused with a message naming what they run."""

import pytest

from latency_tuner.vllm.args import NotVllmError, VllmCommandLine


@pytest.mark.parametrize(
    ("command", "args", "found"),
    [
        (
            ["text-generation-launcher"],
            ["--model-id", "m"],
            "text-generation-launcher (Hugging Face TGI)",
        ),
        (None, ["--model-id", "m"], "--model-id, as Hugging Face TGI"),
        (["python", "app.py"], None, "python app.py (a Python program)"),
        (["python3", "-c", "import x"], None, "an inline Python program"),
        (["python3"], None, "python3 with no program"),
        (["uvicorn", "main:app", "--port", "80"], None, "uvicorn (a Python web app)"),
        (["python", "-m", "uvicorn", "main:app"], None, "uvicorn (a Python web app)"),
        (["python3", "-m", "sglang.launch_server"], ["--model-path", "m"], "SGLang"),
        (["python3", "-m", "mypkg.server"], None, "python3 -m mypkg.server (a Python module)"),
        (["trtllm-serve", "m"], None, "trtllm-serve (TensorRT-LLM)"),
        (["ollama", "serve"], None, "ollama (Ollama)"),
        (["/usr/local/bin/llama-server", "-m", "x.gguf"], None, "llama-server (llama.cpp)"),
        (["vllm", "bench", "serve"], None, "`vllm bench`"),
        (["vllm"], None, "`vllm` with no subcommand"),
        (["python3", "-m", "vllm.entrypoints.cli.main", "bench"], None, "without `serve`"),
        (["bash", "/start.sh"], None, "bash /start.sh (a script file"),
        (["sh", "-c"], None, "sh -c with no script"),
        (["sh", "-e"], None, "sh with no script"),
        (["sh", "-o", "pipefail", "-c", "ollama serve"], None, "ollama (Ollama)"),
        (["my-server"], ["--port", "80"], "'my-server'"),
        (["env", "A=1"], None, "no program at all"),
        (None, None, "no command and its args name no model"),
        (None, ["--port", "80"], "no command and its args name no model"),
    ],
)
def test_a_container_that_is_not_vllm_is_refused_with_what_it_runs(
    command: list[str] | None, args: list[str] | None, found: str
) -> None:
    with pytest.raises(NotVllmError) as caught:
        VllmCommandLine.parse(command, args)
    assert found in str(caught.value)


def test_the_tgi_message_reads_as_a_sentence() -> None:
    with pytest.raises(NotVllmError) as caught:
        VllmCommandLine.parse(["text-generation-launcher"], ["--model-id", "m"])
    assert str(caught.value) == (
        "this container runs text-generation-launcher (Hugging Face TGI), not a vLLM server"
    )


def test_not_vllm_is_a_value_error() -> None:
    assert issubclass(NotVllmError, ValueError)


def test_with_no_command_args_that_start_with_a_launcher_are_read_as_one() -> None:
    line = VllmCommandLine.parse(None, ["vllm", "serve", "m"])
    assert line.model == "m"
    assert line.launcher == "vllm serve"


def test_with_no_command_args_that_start_with_a_known_other_program_are_refused() -> None:
    with pytest.raises(NotVllmError, match="TGI"):
        VllmCommandLine.parse(None, ["text-generation-launcher", "--model-id", "m"])
