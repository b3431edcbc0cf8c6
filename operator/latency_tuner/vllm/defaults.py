"""What a vLLM server actually runs with: flag values after vLLM's own defaults.

(Past 500 lines on purpose: one table of defaults per vLLM release and the reasons given for
each value read best in one place.)

A command line that omits ``--max-num-batched-tokens`` still runs with some value; which one
depends on the engine generation and the GPU. This module knows those defaults (from
``vllm/engine/arg_utils.py`` ``_set_default_args`` and ``vllm/config/*.py``):

V1 engine (0.8+, the only engine from 0.11) / V0 engine:

- enable-prefix-caching: on / off
- enable-chunked-prefill: on / off (some V1 releases ignore ``--no-`` for generative models)
- max-num-batched-tokens (``vllm serve``): V1 16384 on GPUs with >= 160 GiB (B200, MI300X)
  from 0.28.0, 8192 on GPUs with >= 70 GiB other than A100, else 2048; the model's max length
  when chunked prefill is off / V0 512 with chunked prefill, else the model's max length
- max-num-seqs: V1 1024 on those large GPUs, else 256, never above max-num-batched-tokens / 256
- both doubled by ``--performance-mode throughput`` when not written (0.16.0+)
- gpu-memory-utilization: 0.92 (0.9 in older V1 releases; the switch is not pinned) / 0.9
- kv-cache-dtype auto; tensor-, pipeline-, data-parallel-size 1; cpu-offload-gb 0;
  enforce-eager off; quantization, max-model-len, speculative-config: from the checkpoint/none

Which vLLM release changed what (``VllmVersion``; the image tag tells it, ``version_from_image``;
an unknown version is taken as the newest known, ``LATEST_KNOWN``), checked against vLLM
0.32.0's ``engine/arg_utils.py`` where the text says "in 0.32":

- 0.28.0: vllm#51726 (merged 2026-08-10, after 0.27.0 was cut; 0.28.0 came out 2026-08-26)
  made ``vllm serve`` take 16384 batched tokens on GPUs with >= 160 GiB; in 0.32 H100/H200
  keep 8192 for the server (16384 is the offline ``LLM`` class's value there).
- 0.11.1: optimisation levels ``-O0..-O3`` (vllm#26847, default ``-O2``); ``-O0`` compiles
  nothing and captures no CUDA graphs, which is what ``--enforce-eager`` did (in 0.32 the flag
  still parses and turns off compilation and CUDA graphs only, vllm#34523). ``enforce-eager``
  keeps meaning "the flag is set" (the knob that removes it cannot remove ``-O0``); its
  explanation says when ``-O0`` runs the server eagerly anyway.
- 0.14.0: async scheduling on by default; off with a speculative method other than EAGLE/MTP
  and with pipeline parallelism (vllm#31998).
- 0.16.0: ``--performance-mode`` (vllm#34936, merged 2026-02-20; the first release after it is
  taken by date): ``balanced`` by default, ``throughput`` doubles both batch limits.

``explain`` / ``explain_config`` say for each flag which value applies and why (written, or
which default and the rule that chose it); ``applied_defaults`` keeps the unwritten ones, for
the diagnosis' evidence (status and ``latency-tuner diagnose``).

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


@dataclass(frozen=True, order=True)
class VllmVersion:
    """A vLLM release, ``major.minor.patch`` (pre-release and local parts are dropped)."""

    major: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> VllmVersion | None:
        """``"0.28.0"``, ``"v0.11.1rc2"``, ``"0.32.0+cpu"`` -> a version; anything else None."""
        match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?[-.+a-zA-Z0-9]*", text.strip())
        if match is None:
            return None
        major, minor, patch = match.groups()
        return cls(int(major), int(minor), int(patch or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def version_from_image(image: str | None) -> VllmVersion | None:
    """The release an image tag names (``vllm/vllm-openai:v0.28.1``); None for ``latest``,
    digests and tags that are not versions."""
    if not image or "@" in image:
        return None
    tail = image.rsplit("/", 1)[-1]
    _, colon, tag = tail.partition(":")
    return VllmVersion.parse(tag) if colon else None


LATEST_KNOWN = VllmVersion(0, 32, 0)
O_LEVELS_SINCE = VllmVersion(0, 11, 1)
ASYNC_SCHEDULING_SINCE = VllmVersion(0, 14, 0)
PERFORMANCE_MODE_SINCE = VllmVersion(0, 16, 0)
HUGE_GPU_BATCH_SINCE = VllmVersion(0, 28, 0)
_HUGE_GPU_GIB = 160.0
DEFAULT_OPTIMIZATION_LEVEL = 2
# Speculative methods that keep async scheduling on (vllm#31998).
_ASYNC_SPEC_METHODS = frozenset({"eagle", "eagle3", "mtp"})

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

    def is_huge(self) -> bool | None:
        """vLLM's largest tier (>= 160 GiB: B200, MI300X); None when memory is unknown."""
        memory = self.memory_gib()
        return None if memory is None else memory >= _HUGE_GPU_GIB


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
    version: VllmVersion | None = None,
    performance_mode: str | None = None,
) -> Value:
    """vLLM's default for ``flag`` (canonical name) when the command line does not set it.

    ``chunked_prefill`` / ``max_num_batched_tokens`` are the effective values of those flags,
    which two defaults depend on (None: take their own defaults); ``version`` None is the
    newest known release. None for unknown flags and for defaults that depend on what we
    cannot see.
    """
    return _default(
        flag,
        engine=engine,
        hardware=hardware or Hardware(),
        chunked_prefill=chunked_prefill,
        max_num_batched_tokens=max_num_batched_tokens,
        version=version or LATEST_KNOWN,
        performance_mode=performance_mode,
    )[0]


def _default(
    flag: str,
    *,
    engine: Engine,
    hardware: Hardware,
    chunked_prefill: bool | None,
    max_num_batched_tokens: int | None,
    version: VllmVersion,
    performance_mode: str | None,
) -> tuple[Value, str]:
    """The default and, in words, the rule that chose it."""
    if chunked_prefill is None:
        chunked_prefill = engine == "v1"
    throughput = performance_mode == "throughput" and version >= PERFORMANCE_MODE_SINCE
    if flag in ("enable-prefix-caching", "enable-chunked-prefill"):
        return engine == "v1", ("on by default on the V1 engine" if engine == "v1"
                                else "off by default on the V0 engine")  # fmt: skip
    if flag == "max-num-batched-tokens":
        if not chunked_prefill:
            return None, "without chunked prefill it is the model's max length (not visible here)"
        if engine == "v0":
            return 512, "512 on the V0 engine with chunked prefill"
        value, why = _batched_tokens(hardware, version)
        return _doubled(value, why, throughput)
    if flag == "max-num-seqs":
        large = hardware.is_large() or hardware.is_huge()
        if engine == "v0":
            value, why = 256, "256 on the V0 engine"
        elif large is None:
            return None, "depends on the GPU's memory, which is unknown"
        else:
            seqs, why = (1024, "1024 on GPUs with >= 70 GiB other than A100") if large else (
                256, "256 on GPUs under 70 GiB (and A100)")  # fmt: skip
            value, why = _doubled(seqs, why, throughput)
        if max_num_batched_tokens is None and engine == "v1":
            max_num_batched_tokens = _int(_default("max-num-batched-tokens", engine=engine,
                hardware=hardware, chunked_prefill=None, max_num_batched_tokens=None,
                version=version, performance_mode=performance_mode)[0])  # fmt: skip
        cap = max_num_batched_tokens
        if isinstance(value, int) and cap is not None and cap < value:
            return cap, f"{why}, capped at max-num-batched-tokens"
        return value, why
    if flag == "optimization-level":
        if version < O_LEVELS_SINCE:
            return None, f"vLLM {version} has no optimisation levels (from {O_LEVELS_SINCE})"
        return (
            DEFAULT_OPTIMIZATION_LEVEL,
            f"-O{DEFAULT_OPTIMIZATION_LEVEL} by default from {O_LEVELS_SINCE}",
        )
    if flag == "async-scheduling":
        if version < ASYNC_SCHEDULING_SINCE:
            return False, f"off by default before {ASYNC_SCHEDULING_SINCE}"
        return True, f"on by default from {ASYNC_SCHEDULING_SINCE}"
    if flag == "performance-mode":
        if version < PERFORMANCE_MODE_SINCE:
            return None, f"vLLM {version} has no --performance-mode (from {PERFORMANCE_MODE_SINCE})"
        return "balanced", f"balanced by default from {PERFORMANCE_MODE_SINCE}"
    simple = _SIMPLE_DEFAULTS.get(flag, {}).get(engine)
    return simple, ("vLLM's default" if simple is not None else "no default known")


def _batched_tokens(hardware: Hardware, version: VllmVersion) -> tuple[int | None, str]:
    if hardware.is_huge():
        if version >= HUGE_GPU_BATCH_SINCE:
            return 16384, (f"16384 on GPUs with >= 160 GiB from {HUGE_GPU_BATCH_SINCE} "
                           "(vllm#51726)")  # fmt: skip
        return 8192, f"8192 on GPUs with >= 70 GiB before {HUGE_GPU_BATCH_SINCE}"
    large = hardware.is_large()
    if large is None:
        return None, "depends on the GPU's memory, which is unknown"
    if large:
        return 8192, "8192 for vllm serve on GPUs with >= 70 GiB other than A100"
    return 2048, "2048 for vllm serve on GPUs under 70 GiB (and A100)"


def _doubled(value: int | None, why: str, throughput: bool) -> tuple[int | None, str]:
    if throughput and value is not None:
        return value * 2, f"{why}, doubled by --performance-mode throughput"
    return value, why


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
    line: VllmCommandLine,
    *,
    engine: Engine = "v1",
    hardware: Hardware | None = None,
    version: VllmVersion | None = None,
) -> dict[str, Value]:
    """Every tuning flag's effective value: written if set, else vLLM's default."""
    return {
        flag: resolved.value
        for flag, resolved in explain_config(
            line, engine=engine, hardware=hardware, version=version, flags=TUNING_FLAGS
        ).items()
    }


def effective_value(
    line: VllmCommandLine,
    flag: str,
    *,
    engine: Engine = "v1",
    hardware: Hardware | None = None,
    version: VllmVersion | None = None,
) -> Value:
    """The effective value of one flag (any name spelling): written, else vLLM's default."""
    key = flags.key_for(flag)
    if key in TUNING_FLAGS or key in VERSIONED_FLAGS:
        return explain(line, key, engine=engine, hardware=hardware, version=version).value
    written = written_value(line, key)
    return written if written is not None else default_value(key, engine=engine, version=version)


# Flags whose default depends on the release (explained, not hashed: see config_hash).
VERSIONED_FLAGS: tuple[str, ...] = ("optimization-level", "async-scheduling", "performance-mode")


@dataclass(frozen=True)
class Resolved:
    """One flag's effective value and why: written on the command line, or which default."""

    flag: str
    value: Value
    written: bool
    reason: str

    def describe(self) -> str:
        """``"max-num-batched-tokens=16384 (16384 on GPUs with >= 160 GiB from 0.28.0 ...)"``."""
        shown = "unknown" if self.value is None else str(self.value).lower() if isinstance(
            self.value, bool) else str(self.value)  # fmt: skip
        return f"{self.flag}={shown} ({self.reason})"


def explain(
    line: VllmCommandLine,
    flag: str,
    *,
    engine: Engine = "v1",
    hardware: Hardware | None = None,
    version: VllmVersion | None = None,
) -> Resolved:
    """One flag (canonical name): its effective value and the reason."""
    return explain_config(line, engine=engine, hardware=hardware, version=version,
                          flags=(flags.key_for(flag),))[flags.key_for(flag)]  # fmt: skip


def explain_config(
    line: VllmCommandLine,
    *,
    engine: Engine = "v1",
    hardware: Hardware | None = None,
    version: VllmVersion | None = None,
    flags: tuple[str, ...] = (*TUNING_FLAGS, *VERSIONED_FLAGS),
) -> dict[str, Resolved]:
    """The effective value of each of ``flags`` with the rule that gave it.

    ``version`` None is the newest release known here (``LATEST_KNOWN``), and says so.
    """
    release = version or LATEST_KNOWN
    suffix = "" if version is not None else f"; vLLM version unknown, taken as {LATEST_KNOWN}"
    hw = hardware or Hardware()
    out: dict[str, Resolved] = {}
    # Defaults depend on these two, so they are resolved first whatever ``flags`` asks for.
    wanted = ("enable-chunked-prefill", "max-num-batched-tokens", *flags)
    mode = written_value(line, "performance-mode")
    for flag in dict.fromkeys(wanted):
        written = written_value(line, flag)
        if flag == "optimization-level" and isinstance(written, str) and written.isdigit():
            written = int(written)
        if written is not None:
            out[flag] = Resolved(flag, written, True, "written on the command line")
            continue
        chunked = out["enable-chunked-prefill"].value if "enable-chunked-prefill" in out else None
        batched = out["max-num-batched-tokens"].value if "max-num-batched-tokens" in out else None
        value, why = _default(
            flag,
            engine=engine,
            hardware=hw,
            chunked_prefill=chunked if isinstance(chunked, bool) else None,
            max_num_batched_tokens=_int(batched),
            version=release,
            performance_mode=mode if isinstance(mode, str) else None,
        )
        value, why = _implied(line, flag, value, why, release)
        out[flag] = Resolved(flag, value, False, why + suffix)
    return {flag: out[flag] for flag in flags}


# Flags whose default depends on the GPU, the vLLM release, the engine or other flags.
RULED_FLAGS: tuple[str, ...] = (
    "max-num-batched-tokens",
    "max-num-seqs",
    "gpu-memory-utilization",
    "enable-chunked-prefill",
    *VERSIONED_FLAGS,
)


def applied_defaults(
    line: VllmCommandLine,
    wanted: tuple[str, ...],
    *,
    hardware: Hardware | None = None,
    version: VllmVersion | None = None,
) -> tuple[Resolved, ...]:
    """The flags of ``wanted`` (canonical names) that the command line leaves to vLLM and whose
    default a rule picks (the GPU's memory, the release, other flags: ``RULED_FLAGS``), each
    with the default and the rule; fixed defaults (tensor-parallel-size 1, ...) are left out."""
    known = tuple(f for f in dict.fromkeys(wanted) if f in RULED_FLAGS)
    resolved = explain_config(line, hardware=hardware, version=version, flags=known)
    return tuple(r for r in resolved.values() if not r.written)


def _implied(
    line: VllmCommandLine, flag: str, value: Value, why: str, version: VllmVersion
) -> tuple[Value, str]:
    """Defaults that other written flags change."""
    if (
        flag == "enforce-eager"
        and version >= O_LEVELS_SINCE
        and line.get("optimization-level") == "0"
    ):
        # Runs eagerly all the same, but the value stays: it answers "is --enforce-eager set",
        # which is what removing the flag (the enforceEager knob) can change.
        return value, (
            f"{why}; but -O0 is written, which compiles nothing and captures no CUDA graphs "
            "either: removing --enforce-eager would not change that"
        )
    if flag == "async-scheduling" and value is True:
        spec = written_value(line, "speculative-config")
        method = _spec_method(spec) if isinstance(spec, str) else None
        if method is not None and method not in _ASYNC_SPEC_METHODS:
            return False, f"off with speculative method {method!r}: only EAGLE/MTP keep it"
        pipeline = written_value(line, "pipeline-parallel-size")
        if isinstance(pipeline, int) and pipeline > 1:
            return False, "off with pipeline parallelism"
    return value, why


def _spec_method(spec: str) -> str | None:
    try:
        config = json.loads(spec)
    except ValueError:
        return None
    method = config.get("method") if isinstance(config, dict) else None
    return str(method).lower() if method is not None else None


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
