"""What a vLLM server actually runs with: flag values after vLLM's own defaults.

A command line that omits ``--max-num-batched-tokens`` still runs with some value; which one
depends on the engine generation and the GPU. This module knows those defaults (from
``vllm/engine/arg_utils.py`` ``_set_default_args`` and ``vllm/config/*.py``):

V1 engine (0.8+, the only engine from 0.11) / V0 engine:

- enable-prefix-caching: on / off
- enable-chunked-prefill: on / off (some V1 releases ignore ``--no-`` for generative models)
- max-num-batched-tokens: V1 8192 on GPUs with >= 70 GiB other than A100, else 2048; the
  model's max length when chunked prefill is off / V0 512 with chunked prefill, else the
  model's max length
- max-num-seqs: V1 1024 on those large GPUs, else 256, never above max-num-batched-tokens / 256
- gpu-memory-utilization: 0.92 (0.9 in older V1 releases; the switch is not pinned) / 0.9
- kv-cache-dtype auto; tensor-, pipeline-, data-parallel-size 1; cpu-offload-gb 0;
  enforce-eager off; quantization, max-model-len, speculative-config: from the checkpoint/none

A value that depends on what we cannot see (the checkpoint's max length, an unknown GPU) is
``None``. Also: ``parse_size`` reads vLLM's human-readable integers (``8k`` = 8000,
``8K`` = 8192) and ``config_hash`` gives a short stable hash of the effective configuration,
the same however the flags are spelled or ordered.

Pure: no I/O, no clocks, never imports an HTTP or Kubernetes client; it never decides what to
tune, only what a command line means.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Literal

from latency_tuner.vllm import _args_flags as flags
from latency_tuner.vllm.args import VllmCommandLine

Engine = Literal["v1", "v0"]
Value = bool | int | float | str | None

BOOLEAN_TUNING_FLAGS = ("enable-prefix-caching", "enable-chunked-prefill", "enforce-eager")
SIZE_FLAGS = ("max-num-batched-tokens", "max-model-len")
INT_FLAGS = (
    "max-num-seqs",
    "tensor-parallel-size",
    "pipeline-parallel-size",
    "data-parallel-size",
)
FLOAT_FLAGS = ("gpu-memory-utilization", "cpu-offload-gb")
TEXT_FLAGS = ("kv-cache-dtype", "quantization")
JSON_FLAGS = ("speculative-config",)
# Flags whose effective value enters the hash (others enter as written, sorted).
TUNING_FLAGS: tuple[str, ...] = (
    *BOOLEAN_TUNING_FLAGS,
    *SIZE_FLAGS,
    *INT_FLAGS,
    *FLOAT_FLAGS,
    *TEXT_FLAGS,
    *JSON_FLAGS,
)

_LARGE_GPU_GIB = 70.0
# GiB by a word of the GPU product name (``nvidia.com/gpu.product`` labels and friends).
_GPU_MEMORY_GIB = {
    "b200": 180.0,
    "gb200": 186.0,
    "h200": 141.0,
    "gh200": 96.0,
    "h100": 80.0,
    "h800": 80.0,
    "h20": 96.0,
    "a100": 40.0,
    "a800": 40.0,
    "l40s": 48.0,
    "l40": 48.0,
    "a6000": 48.0,
    "a40": 48.0,
    "l4": 24.0,
    "a10g": 24.0,
    "a10": 24.0,
    "4090": 24.0,
    "3090": 24.0,
    "t4": 16.0,
    "v100": 16.0,
    "mi300x": 192.0,
    "mi325x": 256.0,
    "mi250x": 128.0,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class Hardware:
    """What we know of the GPU: its product name and/or memory (GiB)."""

    gpu_product: str | None = None
    gpu_memory_gib: float | None = None

    def memory_gib(self) -> float | None:
        """Explicit memory, else read from the product name (``...-80GB``, ``H100``), else None."""
        if self.gpu_memory_gib is not None:
            return self.gpu_memory_gib
        words = re.split(r"[-_\s]+", (self.gpu_product or "").lower())
        for word in words:
            if match := re.fullmatch(r"(\d+)gb", word):
                return float(match.group(1))
        if "h100" in words and "nvl" in words:
            return 94.0
        return next((_GPU_MEMORY_GIB[w] for w in words if w in _GPU_MEMORY_GIB), None)

    def is_large(self) -> bool | None:
        """vLLM's "large GPU" test (>= 70 GiB and not an A100); None when memory is unknown."""
        memory = self.memory_gib()
        if memory is None:
            return None
        return memory >= _LARGE_GPU_GIB and "a100" not in (self.gpu_product or "").lower()


def parse_size(text: str) -> int:
    """vLLM's human-readable integers: ``2048``, ``8k`` (8000), ``8K`` (8192), ``25.6k``.

    Raises ValueError for anything else, and for decimals with binary suffixes (``1.5K``).
    """
    text = text.strip()
    match = _SIZE.fullmatch(text)
    if match is None:
        return int(text)
    number, suffix = match.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    if "." in number:
        raise ValueError(f"{text!r}: decimals are not allowed with binary suffixes")
    return int(number) * _BINARY[suffix]


def default_value(
    flag: str,
    *,
    engine: Engine = "v1",
    hardware: Hardware | None = None,
    chunked_prefill: bool | None = None,
    max_num_batched_tokens: int | None = None,
) -> Value:
    """vLLM's default for ``flag`` (canonical name) when the command line does not set it.

    ``chunked_prefill`` / ``max_num_batched_tokens`` are the effective values of those flags,
    which two defaults depend on (None: take their own defaults). None for unknown flags and
    for defaults that depend on what we cannot see.
    """
    large = (hardware or Hardware()).is_large()
    if chunked_prefill is None:
        chunked_prefill = engine == "v1"
    if flag in ("enable-prefix-caching", "enable-chunked-prefill"):
        return engine == "v1"
    if flag == "max-num-batched-tokens":
        if not chunked_prefill:
            return None  # the model's max length
        if engine == "v0":
            return 512
        return None if large is None else (8192 if large else 2048)
    if flag == "max-num-seqs":
        seqs = 256 if engine == "v0" else (None if large is None else (1024 if large else 256))
        if max_num_batched_tokens is None and engine == "v1":
            max_num_batched_tokens = _int(
                default_value("max-num-batched-tokens", engine=engine, hardware=hardware)
            )
        if seqs is not None and max_num_batched_tokens is not None:
            return min(seqs, max_num_batched_tokens)
        return seqs
    return _SIMPLE_DEFAULTS.get(flag, {}).get(engine)


_SIMPLE_DEFAULTS: dict[str, dict[Engine, Value]] = {
    "gpu-memory-utilization": {"v1": 0.92, "v0": 0.9},
    "kv-cache-dtype": {"v1": "auto", "v0": "auto"},
    "tensor-parallel-size": {"v1": 1, "v0": 1},
    "pipeline-parallel-size": {"v1": 1, "v0": 1},
    "data-parallel-size": {"v1": 1, "v0": 1},
    "cpu-offload-gb": {"v1": 0.0, "v0": 0.0},
    "enforce-eager": {"v1": False, "v0": False},
}


def _int(value: Value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def written_value(line: VllmCommandLine, flag: str) -> Value:
    """The value the command line sets for ``flag``, typed; None when it does not set it.

    A value that does not parse (``$(MAX_SEQS)``, ``abc``) comes back as the written string.
    """
    if flag in BOOLEAN_TUNING_FLAGS or flag in flags.BOOLEAN_FLAGS:
        try:
            return line.flag_enabled(flag)
        except ValueError:
            return line.get(flag)
    text = line.get(flag)
    if text is None:
        return None
    try:
        if flag in SIZE_FLAGS:
            return parse_size(text)
        if flag in INT_FLAGS:
            return int(text)
        if flag in FLOAT_FLAGS:
            return float(text)
    except ValueError:
        return text
    if flag in JSON_FLAGS:
        try:
            return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        except ValueError:
            return text
    if flag in TEXT_FLAGS:
        return text.lower()
    return text


def effective_config(
    line: VllmCommandLine, *, engine: Engine = "v1", hardware: Hardware | None = None
) -> dict[str, Value]:
    """Every tuning flag's effective value: written if set, else vLLM's default."""
    config: dict[str, Value] = {}
    for flag in TUNING_FLAGS:
        written = written_value(line, flag)
        if written is not None:
            config[flag] = written
            continue
        chunked = config.get("enable-chunked-prefill")
        config[flag] = default_value(
            flag,
            engine=engine,
            hardware=hardware,
            chunked_prefill=chunked if isinstance(chunked, bool) else None,
            max_num_batched_tokens=_int(config.get("max-num-batched-tokens")),
        )
    return config


def effective_value(
    line: VllmCommandLine,
    flag: str,
    *,
    engine: Engine = "v1",
    hardware: Hardware | None = None,
) -> Value:
    """The effective value of one flag (any name spelling): written, else vLLM's default."""
    key = flags.key_for(flag)
    if key in TUNING_FLAGS:
        return effective_config(line, engine=engine, hardware=hardware)[key]
    written = written_value(line, key)
    return written if written is not None else default_value(key, engine=engine)


def config_hash(
    line: VllmCommandLine,
    *,
    engine: Engine = "v1",
    hardware: Hardware | None = None,
    length: int = 16,
) -> str:
    """Short sha256 hex of model + effective tuning values + the other flags, sorted.

    Independent of spelling (``--max_num_seqs``/``--max-num-seqs``, ``-tp``), order, ``=``
    form, and of writing a default explicitly (``--enable-prefix-caching`` on V1).
    """
    others: dict[str, str | None] = {}
    for key, value in line.flags():
        if key in TUNING_FLAGS or key.removeprefix("no-") in TUNING_FLAGS:
            continue
        if key.startswith("no-") and key[3:] in flags.BOOLEAN_FLAGS:
            others[key[3:]] = "false"
        elif key in flags.BOOLEAN_FLAGS:
            literal = flags.bool_literal(value) if value is not None else True
            others[key] = value if literal is None else str(literal).lower()
        else:
            others[key] = value
    payload = {
        "model": line.model,
        "tuning": effective_config(line, engine=engine, hardware=hardware),
        "other": sorted(others.items()),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]
