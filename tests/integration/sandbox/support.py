"""Helpers for the sandbox tests: manifests, waiting, and a look at our child processes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
NAMESPACE = "llm"


def deployment(
    name: str = "llm",
    *,
    args: list[str] | None = None,
    gpus: int = 1,
    replicas: int = 1,
    deadline: int | None = 600,
) -> dict[str, Any]:
    """A vLLM Deployment in the image-entrypoint form (args start with the model)."""
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai:v0.11.0",
                        "args": args if args is not None else [MODEL, "--max-num-seqs", "8"],
                        "ports": [{"containerPort": 8000}],
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                    }
                ]
            },
        },
    }
    if deadline is not None:
        spec["progressDeadlineSeconds"] = deadline
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


async def eventually(
    check: Callable[[], Awaitable[Any]], *, within: float = 20.0, every: float = 0.1
) -> Any:
    """Poll ``check`` until it returns something truthy; fail with its last value."""
    deadline = time.monotonic() + within
    value: Any = None
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(every)
    raise AssertionError(f"not true within {within} s; last value: {value!r}")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def child_pids() -> set[int]:
    """Live (or zombie) processes whose parent is this test process."""
    me = os.getpid()
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid ...
        if int(fields[1]) == me:
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
