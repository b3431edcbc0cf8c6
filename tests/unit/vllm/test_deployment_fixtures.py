"""Real-world Deployment manifests: read the vLLM container, change a flag, render it back."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

FIXTURES = Path(__file__).parents[2] / "fixtures" / "deployments"


def containers(name: str) -> list[dict[str, Any]]:
    manifest = yaml.safe_load((FIXTURES / name).read_text())
    spec = manifest["spec"]
    if "leaderWorkerTemplate" in spec:
        pod = spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    else:
        pod = spec["template"]["spec"]
    result: list[dict[str, Any]] = pod["containers"]
    return result


def parse(container: dict[str, Any]) -> VllmCommandLine:
    return VllmCommandLine.parse(container.get("command"), container.get("args"))


@dataclass(frozen=True)
class Expected:
    model: str
    served: str
    flags: dict[str, str]
    booleans: dict[str, bool | None]


VLLM_FIXTURES: dict[str, Expected] = {
    "kserve-vllm-rawdeployment.yaml": Expected(
        model="/mnt/models",
        served="granite-8b",
        flags={"tensor-parallel-size": "2", "max-model-len": "8192", "port": "8080"},
        booleans={"enable-prefix-caching": True},
    ),
    "production-stack-deployment-vllm.yaml": Expected(
        model="meta-llama/Llama-3.1-8B-Instruct",
        served="meta-llama/Llama-3.1-8B-Instruct",
        flags={
            "gpu-memory-utilization": "0.8",
            "max-num-seqs": "32",
            "kv-transfer-config": '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}',
        },
        booleans={"enable-chunked-prefill": True, "enable-prefix-caching": True},
    ),
    "vllm-docs-shell-deployment.yaml": Expected(
        model="mistralai/Mistral-7B-Instruct-v0.3",
        served="mistralai/Mistral-7B-Instruct-v0.3",
        flags={"max-num-batched-tokens": "1024"},
        booleans={"trust-remote-code": True, "enable-chunked-prefill": True},
    ),
    "vllm-image-entrypoint-deployment.yaml": Expected(
        model="Qwen/Qwen2.5-7B-Instruct",
        served="Qwen/Qwen2.5-7B-Instruct",
        flags={
            "max-num-seqs": "256",
            "gpu-memory-utilization": "0.9",
            "tensor-parallel-size": "1",
            "speculative-config": (
                '{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}'
            ),
        },
        booleans={"disable-log-requests": True, "enable-prefix-caching": None},
    ),
    "lws-vllm-multinode.yaml": Expected(
        model="meta-llama/Meta-Llama-3.1-405B-Instruct",
        served="meta-llama/Meta-Llama-3.1-405B-Instruct",
        flags={"tensor-parallel-size": "8", "pipeline-parallel-size": "2", "port": "8080"},
        booleans={},
    ),
}


@pytest.mark.parametrize("name", sorted(VLLM_FIXTURES))
def test_each_vllm_fixture_reads_its_model_and_key_flags(name: str) -> None:
    expected = VLLM_FIXTURES[name]
    line = parse(containers(name)[0])
    assert line.model == expected.model
    assert line.served_model_name == expected.served
    for flag, value in expected.flags.items():
        assert line.get(flag) == value, flag
    for flag, enabled in expected.booleans.items():
        assert line.flag_enabled(flag) is enabled, flag


@pytest.mark.parametrize("name", sorted(VLLM_FIXTURES))
def test_each_vllm_fixture_renders_back_unchanged(name: str) -> None:
    container = containers(name)[0]
    assert parse(container).render() == (container.get("command"), container.get("args"))


@pytest.mark.parametrize("name", sorted(VLLM_FIXTURES))
def test_each_vllm_fixture_survives_a_change_and_a_round_trip(name: str) -> None:
    container = containers(name)[0]
    line = parse(container)
    changed = (
        line.with_value("max-num-batched-tokens", "2048")
        .with_value("max-num-seqs", "48")
        .with_flag("enable-prefix-caching", False)
    )
    command, args = changed.render()
    again = VllmCommandLine.parse(command, args)
    assert again.model == line.model
    assert again.get("max-num-batched-tokens") == "2048"
    assert again.get("max-num-seqs") == "48"
    assert again.flag_enabled("enable-prefix-caching") is False
    untouched = {"max-num-batched-tokens", "max-num-seqs", "enable-prefix-caching"}
    before = [f for f in line.flags() if f[0].removeprefix("no-") not in untouched]
    after = [f for f in again.flags() if f[0].removeprefix("no-") not in untouched]
    assert after == before
    # the container's shape is kept: a command stays a command, args stay args
    assert (command is None) == (container.get("command") is None)
    assert (args is None) == (container.get("args") is None)


def test_the_production_stack_spelling_survives_a_change() -> None:
    container = containers("production-stack-deployment-vllm.yaml")[0]
    command, _ = parse(container).with_value("gpu-memory-utilization", "0.9").render()
    assert command is not None
    at = command.index("--gpu_memory_utilization")
    assert command[at : at + 2] == ["--gpu_memory_utilization", "0.9"]


def test_the_docs_shell_deployment_changes_only_the_one_word() -> None:
    container = containers("vllm-docs-shell-deployment.yaml")[0]
    _, args = parse(container).with_value("max-num-batched-tokens", "4096").render()
    assert args == [container["args"][0].replace("1024", "4096")]


def test_a_sidecar_in_a_vllm_pod_is_not_vllm() -> None:
    sidecar = containers("vllm-image-entrypoint-deployment.yaml")[1]
    with pytest.raises(NotVllmError):
        parse(sidecar)


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("tgi-deployment.yaml", "Hugging Face TGI"),
        ("sglang-deployment.yaml", "SGLang"),
    ],
)
def test_non_vllm_fixtures_are_refused_with_what_they_run(name: str, found: str) -> None:
    with pytest.raises(NotVllmError, match=found):
        parse(containers(name)[0])
