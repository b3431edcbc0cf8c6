"""Only a container that really runs vLLM's server is taken for one.

With a ``command`` the program is named (vllm, python -m vllm..., a shell running vllm). Without
one the image's entrypoint runs whatever the args say: then the image must be a vLLM image, or
the args must start with a model and carry flags only vLLM has. The operator rewrites the args
of what it recognises, so recognising a database or a proxy would let a LatencyTarget tamper
with it.
"""

from __future__ import annotations

import pytest

from latency_tuner.vllm.args import NotVllmError, VllmCommandLine, is_vllm_image

MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# Bare args of well-known non-vLLM images, as their Deployments write them.
OTHER_SERVERS = {
    "postgres": (["postgres", "-c", "max_connections=200"], "postgres:16"),
    "postgres-flags": (["-c", "shared_buffers=256MB"], "postgres:16"),
    "minio": (["server", "/data", "--console-address", ":9001"], "minio/minio:latest"),
    "redis": (["redis-server", "--maxmemory", "2gb"], "redis:7"),
    "nginx": (["nginx", "-g", "daemon off;"], "nginx:1.27"),
    "envoy": (["-c", "/etc/envoy/envoy.yaml", "--log-level", "info"], "envoyproxy/envoy:v1.31"),
    "attacker-model-like": ([MODEL, "--port", "8000"], "attacker.example/miner:latest"),
}


@pytest.mark.parametrize("name", list(OTHER_SERVERS))
def test_other_servers_with_bare_args_are_not_taken_for_vllm(name: str) -> None:
    args, image = OTHER_SERVERS[name]
    with pytest.raises(NotVllmError) as caught:
        VllmCommandLine.of_container(None, args, image=image)
    assert image in str(caught.value) or "model" in str(caught.value)


def test_a_refusal_shows_the_image_and_the_args() -> None:
    with pytest.raises(NotVllmError) as caught:
        VllmCommandLine.of_container(None, ["postgres", "-c", "x=1"], image="postgres:16")
    assert str(caught.value) == (
        "this container has no command, runs image postgres:16, and its args (postgres -c x=1)"
        " are not a vLLM server's: a model ('org/name' or a path) followed by vLLM flags"
    )


@pytest.mark.parametrize(
    "image",
    [
        "vllm/vllm-openai:v0.11.0",
        "docker.io/vllm/vllm-openai@sha256:" + "a" * 64,
        "rocm/vllm:latest",
        "registry.example:5000/ml/vllm-cpu:0.32",
        "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.9.1",
    ],
)
def test_a_vllm_image_running_its_entrypoint_is_vllm_even_with_only_a_model(image: str) -> None:
    line = VllmCommandLine.of_container(None, [MODEL], image=image)
    assert line.model == MODEL


@pytest.mark.parametrize(
    "image", ["postgres:16", "nginx", "registry.example:5000/vllm", "example.com/llm:vllm"]
)
def test_only_the_repository_path_can_name_vllm(image: str) -> None:
    expected = image == "registry.example:5000/vllm"
    assert is_vllm_image(image) is expected


@pytest.mark.parametrize(
    "args",
    [
        [MODEL, "--max-num-seqs", "64"],
        ["/models/llama-8b", "--gpu-memory-utilization=0.9"],
        ["$(MODEL_ID)", "--tensor-parallel-size", "2"],
        [MODEL, "--enable-prefix-caching"],
        [MODEL, "--served-model-name", "chat"],
    ],
)
def test_a_model_and_a_vllm_flag_are_vllm_on_any_image(args: list[str]) -> None:
    line = VllmCommandLine.of_container(None, args, image="registry.example/ml/llm-server:1.2")
    assert line.model == args[0]


def test_a_named_vllm_command_needs_no_image() -> None:
    line = VllmCommandLine.of_container(["vllm", "serve"], [MODEL], image="anything:1")
    assert line.launcher == "vllm serve"


def test_a_named_other_command_is_refused_whatever_the_image() -> None:
    with pytest.raises(NotVllmError, match="text-generation-launcher"):
        VllmCommandLine.of_container(
            ["text-generation-launcher"], ["--model-id", MODEL], image="vllm/vllm-openai:v0.11.0"
        )
