"""Where the vLLM venv's python is: named by ``LATENCY_TUNER_VLLM_PYTHON``, else made (or
found, when cached) by ``scripts/setup-vllm.sh``, and the tiny model directory built with it.

Only for a source checkout (the script lives beside the package, not inside it). Runs
processes; never imports vLLM itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from latency_tuner.realengine import tiny_model

ENV_PYTHON = "LATENCY_TUNER_VLLM_PYTHON"
REPO_ROOT = Path(__file__).resolve().parents[3]
SETUP_SCRIPT = REPO_ROOT / "scripts" / "setup-vllm.sh"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding latency_tuner/


class VllmUnavailable(RuntimeError):
    """Real vLLM cannot be installed or found here (the message says why)."""


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "latency-tuner"


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """One process at a time (pytest-xdist workers ask for the venv and the model together)."""
    _cache_dir().mkdir(parents=True, exist_ok=True)
    with (_cache_dir() / f"{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def vllm_python(*, install: bool = True) -> Path:
    """The python of a venv where ``import vllm`` works; installs it on first use, or, with
    ``install=False``, raises VllmUnavailable naming the script that makes it."""
    named = os.environ.get(ENV_PYTHON)
    if named:
        if not Path(named).exists():
            raise VllmUnavailable(f"{ENV_PYTHON}={named} does not exist")
        return Path(named)
    if not SETUP_SCRIPT.exists():
        raise VllmUnavailable(f"{SETUP_SCRIPT} is missing: not a source checkout")
    with _locked("setup-vllm"):
        done = subprocess.run(
            ["bash", str(SETUP_SCRIPT), *([] if install else ["--check"])],
            capture_output=True,
            text=True,
        )
    if done.returncode == 3 and not install:
        raise VllmUnavailable(
            "real vLLM is not installed: run scripts/setup-vllm.sh (or `latency-tuner "
            f"realengine setup`) once, or name a python with vllm in {ENV_PYTHON}"
        )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise VllmUnavailable(f"scripts/setup-vllm.sh failed ({done.returncode}):\n{tail}")
    return Path(done.stdout.strip().splitlines()[-1])


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a process of the vLLM venv: no hub, our package importable."""
    env = dict(os.environ)
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["VLLM_NO_USAGE_STATS"] = "1"
    env["DO_NOT_TRACK"] = "1"
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(PACKAGE_ROOT) + (os.pathsep + path if path else "")
    env.update(extra or {})
    return env


def default_model_dir() -> Path:
    """A cache folder for the tiny model, shared by every clone on the machine."""
    return _cache_dir() / "tiny-llama"


def build_tiny_model(out: Path | None = None, python: Path | None = None) -> Path:
    """Builds (or reuses) the tiny model directory with the vLLM venv's python."""
    out = out or default_model_dir()
    python = python or vllm_python()
    with _locked("tiny-model"):
        done = subprocess.run(
            [str(python), "-m", tiny_model.__name__, str(out)],
            env=child_env(),
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise VllmUnavailable(f"building the tiny model failed:\n{done.stderr[-3000:]}")
    return out
