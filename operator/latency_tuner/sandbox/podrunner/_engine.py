"""What process runs a pod's container: the seam between the pod runner and an engine.

``PodEngine.command(container, port=..., gpu=..., gpus=...)`` answers the command line that
serves ``container`` on ``127.0.0.1:port`` with ``gpus`` GPUs of type ``gpu`` (a simulator GPU
name), or raises ``ValueError`` (``NotVllmError`` among them) when the engine cannot run it; the
runner then shows the pod as ``CreateContainerError``. Whatever runs must answer ``GET /health``
with 200 once ready and serve vLLM's ``/metrics`` and OpenAI API on that port.

``SimulatorEngine`` (the default) runs ``latency-tuner sim`` from the container's vLLM
``command``/``args``: ``$(VAR)`` expanded from the container's env, ``--host``/``--port``
replaced, the GPU limit as ``--sim-gpus`` and the node's GPU as ``--sim-gpu``. Another engine
(a real vLLM, say) implements the same protocol and is passed as ``PodRunner(engine=...)``.

No process is started here: an engine only says what to start.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from latency_tuner.sandbox.podrunner._nodes import GPU_RESOURCE
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

_ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass(frozen=True)
class EngineCommand:
    """A container's process: ``program`` + ``args`` is exec'd; ``args`` is what pods show."""

    program: tuple[str, ...]
    args: tuple[str, ...]
    name: str  # how the pod's log names it
    env: Mapping[str, str] = field(default_factory=dict)  # set over the runner's environment


class PodEngine(Protocol):
    """Chooses the process that runs a pod's container (see the module docstring)."""

    def command(
        self, container: Mapping[str, Any], *, port: int, gpu: str, gpus: int
    ) -> EngineCommand: ...


@dataclass(frozen=True)
class SimulatorEngine:
    """Every container as ``python -m latency_tuner.cli sim serve MODEL ...`` (the simulator)."""

    python: str = sys.executable
    seed: int = 0
    options: Sequence[str] = field(default=())  # extra ``sim`` flags, after the container's

    def command(
        self, container: Mapping[str, Any], *, port: int, gpu: str, gpus: int
    ) -> EngineCommand:
        args = [*sim_argv(container, port=port, gpu=gpu, gpus=gpus)]
        args += ["--sim-seed", str(self.seed), *self.options]
        program = (self.python, "-m", "latency_tuner.cli", "sim")
        return EngineCommand(program=program, args=tuple(args), name="sim")


def _expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in command and args (unknown names stay as written)."""
    return _ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def container_command_line(container: Mapping[str, Any]) -> VllmCommandLine:
    """The container's vLLM command line, ``$(VAR)`` expanded; NotVllmError when it is none."""
    env = {
        str(e["name"]): str(e["value"])
        for e in container.get("env") or []
        if isinstance(e, Mapping) and "name" in e and isinstance(e.get("value"), str)
    }
    command = container.get("command")
    args = container.get("args")
    cl = VllmCommandLine.parse(
        None if command is None else [_expand(str(w), env) for w in command],
        None if args is None else [_expand(str(w), env) for w in args],
    )
    if not cl.model:
        raise NotVllmError("the vLLM command line names no model")
    return cl


def flag_words(cl: VllmCommandLine) -> list[str]:
    """The command line's flags as argv words (``--key=value``; names split on spaces)."""
    words: list[str] = []
    for key, value in cl.flags():
        if value is None:
            words.append(f"--{key}")
        elif key == "served-model-name":
            words += [f"--{key}", *value.split()]
        else:
            words.append(f"--{key}={value}")
    return words


def sim_argv(container: Mapping[str, Any], *, port: int, gpu: str, gpus: int) -> list[str]:
    """``latency-tuner sim`` arguments for a vLLM container; raises NotVllmError otherwise."""
    cl = container_command_line(container)
    assert cl.model is not None
    words = ["serve", cl.model, *flag_words(cl.without("host").without("port"))]
    words += ["--host", "127.0.0.1", "--port", str(port), "--sim-gpu", gpu, "--sim-gpus", str(gpus)]
    return words


def gpu_limit(container: Mapping[str, Any]) -> int:
    resources = container.get("resources") or {}
    value = (resources.get("limits") or {}).get(GPU_RESOURCE)
    if value is None:
        value = (resources.get("requests") or {}).get(GPU_RESOURCE, 0)
    return int(value)


def vllm_container(template: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]]:
    """The index and body of the container that runs vLLM (the first that parses as it)."""
    containers = (template.get("spec") or {}).get("containers") or []
    for i, container in enumerate(containers):
        with contextlib.suppress(NotVllmError, ValueError):
            VllmCommandLine.parse(container.get("command"), container.get("args"))
            return i, container
    return 0, containers[0] if containers else {}
