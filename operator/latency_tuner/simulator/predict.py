"""``latency-tuner sim predict``: the cost model's TTFT and ITL for one configuration.

TTFT: one request of P prompt tokens on an idle engine, prefilled in chunks of
max-num-batched-tokens (vLLM's defaults for the GPU), each chunk one engine step.
ITL: the mean decode step of B requests whose context grows from P to P+O.
No I/O apart from ``main_predict`` printing its result.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from latency_tuner.perf.config import EngineConfig, StartupError, build_engine_config
from latency_tuner.perf.cost import CostModel, Efficiencies

__all__ = ["Prediction", "flags_for", "main_predict", "predict", "predict_for_config"]

_ITL_SAMPLES = 16


@dataclass(frozen=True)
class Prediction:
    ttft_ms: float
    itl_ms: float


class _Flags:
    """A vLLM command line given as flag -> value (None for a bare flag); implements
    ``config.CommandLine`` so ``predict`` can reuse the startup checks without a parser."""

    def __init__(self, model: str, flags: Mapping[str, str | bool | None]) -> None:
        self._model = model
        self._flags = dict(flags)

    @property
    def model(self) -> str | None:
        return self._model

    def get(self, name: str) -> str | None:
        value = self._flags.get(name)
        return value if isinstance(value, str) else None

    def flag_enabled(self, name: str) -> bool | None:
        value = self._flags.get(name)
        return value if isinstance(value, bool) else None


def predict_for_config(
    config: EngineConfig,
    *,
    prompt_tokens: int,
    output_tokens: int,
    batch: int,
    efficiencies: Efficiencies | None = None,
    kernel_only: bool = False,
) -> Prediction:
    """TTFT and ITL of an already validated configuration.

    ``kernel_only``: GPU time only (what kernel-timing estimates such as aiconfigurator's sum),
    without the engine's per-step CPU time and the server's per-request HTTP/tokenisation time.
    """
    cost = CostModel(config, efficiencies=efficiencies)
    chunk = config.max_num_batched_tokens if config.chunked_prefill else prompt_tokens
    ttft, done = 0.0, 0
    while done < prompt_tokens:
        size = min(chunk, prompt_tokens - done)
        ttft += cost.step_time(
            decode_contexts=(), prefill_chunks=((size, done),), kernel_only=kernel_only
        )
        done += size
    if not kernel_only:
        ttft += cost.request_overhead(prompt_tokens)
    k = config.spec.num_speculative_tokens if config.spec is not None else 0
    steps = []
    for i in range(_ITL_SAMPLES):
        context = prompt_tokens + round((i + 0.5) * output_tokens / _ITL_SAMPLES)
        steps.append(
            cost.step_time(
                decode_contexts=[context] * batch,
                prefill_chunks=(),
                spec_tokens=k,
                kernel_only=kernel_only,
            )
        )
    itl = sum(steps) / len(steps) / cost.tokens_per_decode_step_expected()
    return Prediction(ttft_ms=ttft * 1e3, itl_ms=itl * 1e3)


def _str_or_none(value: float | None) -> str | None:
    return None if value is None else str(value)


def flags_for(
    model: str,
    *,
    tp: int = 1,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    max_num_batched_tokens: int | None = None,
    max_model_len: int = 8192,
    max_num_seqs: int | None = None,
    enforce_eager: bool = False,
    cpu_offload_gb: float | None = None,
    speculative_config: str | None = None,
) -> _Flags:
    """A vLLM command line for ``build_engine_config`` without going through a parser."""
    flags: dict[str, str | bool | None] = {
        "tensor-parallel-size": str(tp),
        "max-model-len": str(max_model_len),
        "quantization": quantization,
        "kv-cache-dtype": kv_cache_dtype,
        "max-num-batched-tokens": _str_or_none(max_num_batched_tokens),
        "enforce-eager": enforce_eager or None,
        "cpu-offload-gb": _str_or_none(cpu_offload_gb),
        "speculative-config": speculative_config,
        "max-num-seqs": _str_or_none(max_num_seqs),
    }
    return _Flags(model, flags)


def predict(
    model: str,
    gpu: str,
    *,
    tp: int = 1,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    prompt_tokens: int,
    output_tokens: int,
    batch: int = 1,
    max_num_batched_tokens: int | None = None,
    max_model_len: int | None = None,
    enforce_eager: bool = False,
    cpu_offload_gb: float | None = None,
    speculative_config: str | None = None,
    spec_acceptance: float | None = None,
    efficiencies: Efficiencies | None = None,
    kernel_only: bool = False,
) -> Prediction:
    """TTFT/ITL of ``model`` on ``tp`` GPUs of type ``gpu``; raises StartupError like vLLM.

    ``max_model_len`` defaults to the request length rounded up to 4096 (at least 8192), as an
    operator would set it, so that long-context models fit beside their KV cache.
    ``kernel_only``: see ``predict_for_config``.
    """
    needed = prompt_tokens + output_tokens
    flags = flags_for(
        model,
        tp=tp,
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=max_model_len or max(8192, -(-needed // 4096) * 4096),
        max_num_seqs=max(batch, 1) if batch > 256 else None,
        enforce_eager=enforce_eager,
        cpu_offload_gb=cpu_offload_gb,
        speculative_config=speculative_config,
    )
    config = build_engine_config(flags, gpu=gpu, num_gpus=tp, spec_acceptance=spec_acceptance)
    return predict_for_config(
        config,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        batch=batch,
        efficiencies=efficiencies,
        kernel_only=kernel_only,
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latency-tuner sim predict",
        description="Print the simulator's TTFT and ITL for one vLLM configuration.",
    )
    p.add_argument("--model", required=True)
    p.add_argument("--sim-gpu", required=True, help="H100-SXM, H200, A100-80G, L40S, ...")
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--quantization", "-q")
    p.add_argument("--kv-cache-dtype")
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--cpu-offload-gb", type=float)
    p.add_argument("--speculative-config")
    p.add_argument("--sim-spec-acceptance", type=float)
    p.add_argument("--prompt-tokens", type=int, required=True)
    p.add_argument("--output-tokens", type=int, required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument(
        "--kernel-only",
        action="store_true",
        help="GPU time only: no per-step host time, no per-request server time",
    )
    p.add_argument("--json", action="store_true", help="print JSON only")
    return p


def main_predict(argv: list[str]) -> int:
    """Entry point of ``latency-tuner sim predict``; 0 on success, 1 on a startup error."""
    args = _parser().parse_args(argv)
    try:
        result = predict(
            args.model,
            args.sim_gpu,
            tp=args.tensor_parallel_size,
            quantization=args.quantization,
            kv_cache_dtype=args.kv_cache_dtype,
            prompt_tokens=args.prompt_tokens,
            output_tokens=args.output_tokens,
            batch=args.batch,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_model_len=args.max_model_len,
            enforce_eager=args.enforce_eager,
            cpu_offload_gb=args.cpu_offload_gb,
            speculative_config=args.speculative_config,
            spec_acceptance=args.sim_spec_acceptance,
            kernel_only=args.kernel_only,
        )
    except (StartupError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    payload = {"ttft_ms": round(result.ttft_ms, 3), "itl_ms": round(result.itl_ms, 3)}
    if args.json:
        print(json.dumps(payload))
    else:
        print(f"TTFT {payload['ttft_ms']} ms  ITL {payload['itl_ms']} ms")
    return 0
