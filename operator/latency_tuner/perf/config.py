"""Startup validation: a vLLM command line + hardware -> an engine configuration, or the error
vLLM would stop with.

Pure: no I/O. It reads flags through ``VllmCommandLine`` (``latency_tuner.vllm.args``) and works
out effective values with vLLM V1 defaults; memory accounting follows vLLM's profile run
(weights + activation peak + non-torch memory, the rest of ``gpu_memory_utilization`` is KV cache).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Literal, Protocol

from latency_tuner.hardware import GpuSpec, get_gpu
from latency_tuner.perf import quality
from latency_tuner.perf.models import ModelShape, WeightDtype, resolve_model
from latency_tuner.vllm import defaults as vllm_defaults

__all__ = [
    "SPEC_TYPICAL_ACCEPTANCE",
    "CommandLine",
    "EngineConfig",
    "KvDtype",
    "SpecDecode",
    "StartupError",
    "build_engine_config",
    "default_max_num_batched_tokens",
    "default_max_num_seqs",
    "kv_bytes_per_token_per_gpu",
    "weight_bytes_per_param",
    "weights_bytes_per_gpu",
]

KvDtype = Literal["bf16", "fp8"]
GIB = 2**30


class StartupError(Exception):
    """vLLM would refuse to start with this configuration; the message reads like vLLM's."""


class CommandLine(Protocol):
    """The part of ``latency_tuner.vllm.args.VllmCommandLine`` used here."""

    @property
    def model(self) -> str | None: ...

    def get(self, name: str) -> str | None: ...

    def flag_enabled(self, name: str) -> bool | None: ...


@dataclass(frozen=True)
class SpecDecode:
    """Speculative decoding: k draft tokens per step, each accepted with probability a."""

    method: str
    num_speculative_tokens: int
    acceptance_rate: float
    # One drafter forward pass costs this fraction of the target model's weight reads.
    draft_cost_fraction: float
    # True: each request's acceptance follows its prompt (``acceptance.py``), with
    # ``acceptance_rate`` the method's typical value; False: fixed (--sim-spec-acceptance).
    workload_dependent: bool = True

    @property
    def expected_tokens_per_step(self) -> float:
        a, k = self.acceptance_rate, self.num_speculative_tokens
        if a >= 1.0:
            return float(k + 1)
        return (1.0 - a ** (k + 1)) / (1.0 - a)


@dataclass(frozen=True)
class EngineConfig:
    """Everything the cost model and the scheduler need, with defaults resolved."""

    model: ModelShape
    gpu: GpuSpec
    num_gpus: int
    tp: int
    pp: int
    weight_dtype: WeightDtype
    kv_dtype: KvDtype
    enforce_eager: bool
    cpu_offload_gb: float  # GiB per GPU, as vLLM's --cpu-offload-gb
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    prefix_caching: bool
    gpu_memory_utilization: float
    max_model_len: int
    spec: SpecDecode | None
    served_model_name: str
    num_gpu_blocks: int
    block_size: int = 16
    quantization: str | None = None  # effective method (checkpoint's or --quantization)
    seed: int = 0
    altered_share: float = 0.0  # output tokens that differ from the 16-bit model's (quality.py)

    @property
    def kv_cache_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size

    @property
    def kv_cache_dtype_label(self) -> str:
        """The value vLLM shows as ``cache_dtype`` in ``vllm:cache_config_info``."""
        return "fp8" if self.kv_dtype == "fp8" else "auto"


# --- vLLM V1 defaults (kept here as a fallback to latency_tuner.vllm.defaults) -------------------
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
DEFAULT_BLOCK_SIZE = 16
_CHUNKED_OFF_MIN_BATCHED_TOKENS = 2048
_QUANT_COMPATIBLE: dict[str, frozenset[str]] = {
    "awq": frozenset({"awq", "awq_marlin", "marlin"}),
    "gptq": frozenset({"gptq", "gptq_marlin", "marlin"}),
    "compressed-tensors": frozenset({"compressed-tensors"}),
    "fp8": frozenset({"fp8", "compressed-tensors"}),  # newer FP8 repos use compressed-tensors
}
_KNOWN_QUANT = frozenset(
    {
        "awq",
        "awq_marlin",
        "gptq",
        "gptq_marlin",
        "marlin",
        "fp8",
        "compressed-tensors",
        "bitsandbytes",
        "gguf",
        "modelopt",
        "fbgemm_fp8",
        "ptpc_fp8",
        "experts_int8",
        "none",
    }
)
# Spec-decoding methods -> (acceptance rate, drafter cost per pass as a fraction of the target's
# weight reads). Acceptance depends on the workload (``acceptance.py`` moves it with each
# prompt's repetitiveness); these are typical chat-traffic values.
_SPEC_DEFAULTS: dict[str, tuple[float, float]] = {
    "eagle3": (0.65, 0.05),
    "eagle": (0.60, 0.05),
    "medusa": (0.50, 0.03),
    "mtp": (0.80, 0.05),
    "deepseek_mtp": (0.80, 0.05),
    "ngram": (0.40, 0.0),
    "draft_model": (0.70, 0.15),
}


SPEC_TYPICAL_ACCEPTANCE: dict[str, float] = {m: a for m, (a, _) in _SPEC_DEFAULTS.items()}


def weight_bytes_per_param(dtype: WeightDtype) -> float:
    """Bytes per linear-layer weight, including quantization scales (int4: group 128)."""
    return {"bf16": 2.0, "fp8": 1.0, "int4": 0.53}[dtype]


def _hardware(gpu: GpuSpec) -> vllm_defaults.Hardware:
    return vllm_defaults.Hardware(gpu_product=gpu.name, gpu_memory_gib=gpu.memory_gib)


def default_max_num_batched_tokens(gpu: GpuSpec) -> int:
    """V1 default with chunked prefill: 8192 on >= 70 GiB GPUs other than A100, else 2048."""
    value = vllm_defaults.default_value("max-num-batched-tokens", hardware=_hardware(gpu))
    return value if isinstance(value, int) else 2048


def default_max_num_seqs(gpu: GpuSpec, max_num_batched_tokens: int | None = None) -> int:
    """V1 default: 1024 on those large GPUs, else 256 (never above max-num-batched-tokens)."""
    value = vllm_defaults.default_value(
        "max-num-seqs", hardware=_hardware(gpu), max_num_batched_tokens=max_num_batched_tokens
    )
    return value if isinstance(value, int) else 256


def default_gpu_memory_utilization() -> float:
    value = vllm_defaults.default_value("gpu-memory-utilization")
    return value if isinstance(value, float) else DEFAULT_GPU_MEMORY_UTILIZATION


def parse_human_int(text: str, flag: str) -> int:
    """vLLM's human-readable ints: "8k" = 8000, "8K" = 8192."""
    try:
        return vllm_defaults.parse_size(text)
    except ValueError:
        raise StartupError(f"argument --{flag}: invalid value: {text!r}") from None


def _float(cl: CommandLine, flag: str, default: float) -> float:
    raw = cl.get(flag)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise StartupError(f"argument --{flag}: invalid float value: {raw!r}") from None


def _int(cl: CommandLine, flag: str, default: int | None) -> int | None:
    raw = cl.get(flag)
    return default if raw is None else parse_human_int(raw, flag)


def _effective_weights(
    model: ModelShape, quantization: str | None
) -> tuple[WeightDtype, str | None]:
    """The weight dtype after --quantization, with vLLM's conflict checks."""
    if quantization is not None and quantization.lower() not in _KNOWN_QUANT:
        choices = ", ".join(sorted(_KNOWN_QUANT))
        raise StartupError(
            f"argument --quantization/-q: invalid choice: {quantization!r} (choose from {choices})"
        )
    q = None if quantization is None or quantization.lower() == "none" else quantization.lower()
    if model.quant_method is not None:
        if q is not None and q not in _QUANT_COMPATIBLE.get(model.quant_method, {q}):
            raise StartupError(
                f"Quantization method specified in the model config ({model.quant_method}) does "
                f"not match the quantization method specified in the `quantization` argument "
                f"({q})."
            )
        return model.weight_dtype, q or model.quant_method
    if q is None:
        return "bf16", None
    if q == "fp8":  # online dynamic FP8 of a BF16 checkpoint
        return "fp8", "fp8"
    if q in {"bitsandbytes"}:  # in-flight 4-bit
        return "int4", q
    if q in {"fbgemm_fp8", "ptpc_fp8"}:
        return "fp8", q
    raise StartupError(f"Cannot find the config file for {q}")


def _spec_decode(
    raw: str | None, target: ModelShape, spec_acceptance: float | None
) -> SpecDecode | None:
    if raw is None:
        return None
    try:
        spec = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise StartupError(f"argument --speculative-config: invalid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise StartupError("argument --speculative-config: expected a JSON object")
    method = str(spec.get("method") or ("draft_model" if spec.get("model") else "")).lower()
    if method == "eagle-3":
        method = "eagle3"
    if method not in _SPEC_DEFAULTS:
        known = ", ".join(sorted(_SPEC_DEFAULTS))
        raise StartupError(f"Unsupported speculative method: {method!r} (known: {known})")
    k = spec.get("num_speculative_tokens")
    if not isinstance(k, int) or k < 1:
        raise StartupError("num_speculative_tokens must be provided with speculative model")
    acceptance, fraction = _SPEC_DEFAULTS[method]
    if method == "draft_model" and isinstance(spec.get("model"), str):
        try:
            draft = resolve_model(spec["model"])
        except ValueError:
            pass
        else:
            fraction = min(1.0, draft.params_b / target.params_b)
    if spec_acceptance is not None:
        acceptance = spec_acceptance
    if not 0.0 <= acceptance <= 1.0:
        raise StartupError(f"speculative acceptance rate must be within [0, 1], got {acceptance}")
    return SpecDecode(method, k, acceptance, fraction, workload_dependent=spec_acceptance is None)


def weights_bytes_per_gpu(model: ModelShape, weight_dtype: WeightDtype, tp: int, pp: int) -> float:
    """Weight bytes resident per GPU before CPU offload (embeddings and LM head stay BF16)."""
    linear = model.layers * model.linear_params_per_layer * weight_bytes_per_param(weight_dtype)
    embeddings = model.lm_head_params * 2.0 * (1 if model.tied_embeddings else 2)
    return (linear + embeddings) / (tp * pp)


def kv_bytes_per_token_per_gpu(model: ModelShape, kv_dtype: KvDtype, tp: int, pp: int) -> float:
    """KV bytes one token occupies on one GPU (KV heads replicate when TP > kv_heads)."""
    kv_heads = max(1.0, model.kv_heads / tp)
    per_elem = 1.0 if kv_dtype == "fp8" else 2.0
    return 2.0 * kv_heads * model.head_dim * per_elem * math.ceil(model.layers / pp)


def _reserve_bytes(
    model: ModelShape, *, tp: int, max_num_batched_tokens: int, max_num_seqs: int, eager: bool
) -> float:
    """Activation peak of the profile run + sampler + non-torch memory + CUDA graphs."""
    per_token = (
        8 * model.hidden
        + 2 * (model.heads + 2 * model.kv_heads) * model.head_dim / tp
        + 6 * model.intermediate / tp
    )
    activations = max_num_batched_tokens * per_token
    sampler = max_num_seqs * model.vocab * 4 * 2  # fp32 logits and one softmax copy
    non_torch = 0.5 * GIB + (0.25 * GIB if tp > 1 else 0.0)
    graphs = 0.0 if eager else 0.5 * GIB
    return activations + sampler + non_torch + graphs


def build_engine_config(
    cl: CommandLine,
    *,
    gpu: str,
    num_gpus: int,
    seed: int = 0,
    spec_acceptance: float | None = None,
    altered_share: float | None = None,
) -> EngineConfig:
    """Validate a vLLM command line on ``num_gpus`` GPUs of type ``gpu`` like vLLM's startup.

    Raises StartupError (or UnknownGpuError / UnknownModelError, both ValueErrors).
    """
    spec_gpu = get_gpu(gpu)
    if not cl.model:
        raise StartupError("no model given: pass it as `vllm serve MODEL` or --model MODEL")
    model = resolve_model(cl.model)
    tp = _int(cl, "tensor-parallel-size", 1) or 1
    pp = _int(cl, "pipeline-parallel-size", 1) or 1
    world = tp * pp
    if tp < 1 or pp < 1:
        raise StartupError("tensor/pipeline parallel sizes must be >= 1")
    if world > num_gpus:
        raise StartupError(
            f"World size ({world}) is larger than the number of available GPUs ({num_gpus}) in "
            f"this node (tensor_parallel_size={tp} x pipeline_parallel_size={pp})."
        )
    if model.heads % tp:
        raise StartupError(
            f"Total number of attention heads ({model.heads}) must be divisible by tensor "
            f"parallel size ({tp})."
        )
    if (model.kv_heads % tp) if tp <= model.kv_heads else (tp % model.kv_heads):
        raise StartupError(
            f"Total number of key/value heads ({model.kv_heads}) must be divisible by tensor "
            f"parallel size ({tp}), or tensor parallel size by it."
        )

    weight_dtype, quantization = _effective_weights(model, cl.get("quantization"))
    kv_raw = (cl.get("kv-cache-dtype") or "auto").lower()
    if kv_raw not in {"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"}:
        raise StartupError(f"argument --kv-cache-dtype: invalid choice: {kv_raw!r}")
    kv_dtype: KvDtype = "fp8" if kv_raw.startswith("fp8") else "bf16"
    if kv_dtype == "fp8" and not spec_gpu.supports_fp8:
        raise StartupError(
            f"--kv-cache-dtype {kv_raw} is not supported on {spec_gpu.name}: an FP8 KV cache "
            f"needs compute capability >= 8.9 (Ada/Hopper or newer)."
        )
    # Without FP8 tensor cores vLLM runs FP8 checkpoints weight-only (Marlin W8A16): weight bytes
    # still halve, compute stays BF16. That is handled by the cost model, not refused here.

    enforce_eager = bool(cl.flag_enabled("enforce-eager"))
    chunked = cl.flag_enabled("enable-chunked-prefill")
    chunked_prefill = True if chunked is None else chunked
    prefix = cl.flag_enabled("enable-prefix-caching")
    prefix_caching = True if prefix is None else prefix
    utilization = _float(cl, "gpu-memory-utilization", default_gpu_memory_utilization())
    if not 0.0 < utilization <= 1.0:
        raise StartupError(f"GPU memory utilization must be within (0, 1]. Got {utilization}.")
    cpu_offload_gb = _float(cl, "cpu-offload-gb", 0.0)
    if cpu_offload_gb < 0:
        raise StartupError(f"--cpu-offload-gb must be >= 0, got {cpu_offload_gb}")
    block_size = _int(cl, "block-size", DEFAULT_BLOCK_SIZE) or DEFAULT_BLOCK_SIZE
    if block_size not in {1, 8, 16, 32, 64, 128}:
        raise StartupError(
            f"argument --block-size: invalid choice: {block_size} "
            "(choose from 1, 8, 16, 32, 64, 128)"
        )

    max_model_len = _int(cl, "max-model-len", model.max_model_len) or model.max_model_len
    if max_model_len > model.max_model_len:
        raise StartupError(
            f"User-specified max_model_len ({max_model_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={model.max_model_len} in model's "
            f"config.json). To allow overriding this maximum, set the env var "
            f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
        )
    explicit_batched = _int(cl, "max-num-batched-tokens", None)
    if explicit_batched is not None:
        max_num_batched_tokens = explicit_batched
    elif chunked_prefill:
        max_num_batched_tokens = default_max_num_batched_tokens(spec_gpu)
    else:
        max_num_batched_tokens = max(max_model_len, _CHUNKED_OFF_MIN_BATCHED_TOKENS)
    written_seqs = _int(cl, "max-num-seqs", None)
    max_num_seqs = (
        default_max_num_seqs(spec_gpu, max_num_batched_tokens)
        if written_seqs is None
        else written_seqs
    )
    if not chunked_prefill and max_num_batched_tokens < max_model_len:
        raise StartupError(
            f"max_num_batched_tokens ({max_num_batched_tokens}) is smaller than max_model_len "
            f"({max_model_len}). This effectively limits the maximum sequence length to "
            f"max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
            f"max_num_batched_tokens or decrease max_model_len."
        )
    if max_num_seqs < 1 or max_num_batched_tokens < 1:
        raise StartupError("max_num_seqs and max_num_batched_tokens must be at least 1")
    if max_num_batched_tokens < max_num_seqs:
        raise StartupError(
            f"max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or equal "
            f"to max_num_seqs ({max_num_seqs})."
        )

    spec = _spec_decode(cl.get("speculative-config"), model, spec_acceptance)

    # Memory: vLLM loads the weights, profiles a max-size step, and gives the rest to KV blocks.
    budget = spec_gpu.memory_bytes * utilization
    weights = weights_bytes_per_gpu(model, weight_dtype, tp, pp)
    offloaded = min(weights, cpu_offload_gb * GIB)
    resident = weights - offloaded
    if spec is not None and spec.method != "ngram":
        resident += spec.draft_cost_fraction * weights
    if resident >= budget:
        raise StartupError(
            f"CUDA out of memory while loading the model: {resident / GIB:.2f} GiB of weights per "
            f"GPU > {budget / GIB:.2f} GiB available (gpu_memory_utilization={utilization} x "
            f"{spec_gpu.memory_gib:.2f} GiB on {spec_gpu.name}, tensor_parallel_size={tp}). Use "
            f"more GPUs (tensor parallelism), a quantized checkpoint, or --cpu-offload-gb."
        )
    reserve = _reserve_bytes(
        model,
        tp=tp,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        eager=enforce_eager,
    )
    available = budget - resident - reserve
    if available <= 0:
        raise StartupError(
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )
    per_token = kv_bytes_per_token_per_gpu(model, kv_dtype, tp, pp)
    num_gpu_blocks = int(available // (per_token * block_size))
    if num_gpu_blocks <= 0:
        raise StartupError(
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )
    if num_gpu_blocks * block_size < max_model_len:
        needed = max_model_len * per_token / GIB
        estimated = num_gpu_blocks * block_size
        raise StartupError(
            f"To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({needed:.2f} GiB KV cache is needed, which is larger than the available KV cache "
            f"memory ({available / GIB:.2f} GiB). Based on the available memory, the estimated "
            f"maximum model length is {estimated}. Try increasing `gpu_memory_utilization` or "
            f"decreasing `max_model_len` when initializing the engine."
        )

    served = cl.get("served-model-name") or model.name
    return EngineConfig(
        model=model,
        gpu=spec_gpu,
        num_gpus=num_gpus,
        tp=tp,
        pp=pp,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        enforce_eager=enforce_eager,
        cpu_offload_gb=offloaded / GIB,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        chunked_prefill=chunked_prefill,
        prefix_caching=prefix_caching,
        gpu_memory_utilization=utilization,
        max_model_len=max_model_len,
        spec=spec,
        served_model_name=served.split()[0] if served.strip() else model.name,
        num_gpu_blocks=num_gpu_blocks,
        block_size=block_size,
        quantization=quantization,
        seed=seed,
        altered_share=quality.altered_share(weight_dtype, kv_dtype, altered_share),
    )
