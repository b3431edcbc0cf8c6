"""``latency-tuner diagnose`` reads the Deployment through the operator's own observe step
(``controller.gather``): a container the operator would not find is an error, not a silent
fall-back to the first container, and a Deployment that is not vLLM says so before any
metrics are read (Prometheus here is a closed port: it must not be needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from latency_tuner.cli.diagnose import EXIT_NOT_VLLM, EXIT_UNREACHABLE, EXIT_USAGE, main

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens


def write_deployment(tmp_path: Path, container: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama", "namespace": "ml"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }
    path = tmp_path / "deployment.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def diagnose(path: Path, *more: str) -> int:
    return main(
        ["-n", "ml", "-d", "llama", "--deployment-file", str(path),
         "--prometheus", UNREACHABLE, "--ttft", "p90=500ms", *more]
    )  # fmt: skip


VLLM = {"name": "server", "image": "vllm/vllm-openai:v0.11.0", "args": ["meta-llama/Llama-3.1-8B"]}


def test_a_container_the_operator_would_not_find_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = diagnose(write_deployment(tmp_path, VLLM), "--container", "vllm")
    assert code == EXIT_USAGE
    assert "has no container 'vllm'" in capsys.readouterr().err


def test_a_container_that_is_not_vllm_says_so_before_reading_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nginx = {"name": "server", "image": "nginx", "command": ["nginx", "-g", "daemon off;"]}
    assert diagnose(write_deployment(tmp_path, nginx)) == EXIT_NOT_VLLM
    assert "nginx" in capsys.readouterr().err


def test_the_named_vllm_container_is_measured_and_an_unreachable_source_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = diagnose(write_deployment(tmp_path, VLLM), "--container", "server")
    assert code == EXIT_UNREACHABLE
    assert "127.0.0.1:9" in capsys.readouterr().err
