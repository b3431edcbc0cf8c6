"""First-principles cost of one vLLM engine step (a roofline model of a dense transformer).

step = host overhead (scheduler, input preparation, sampling, output processing; more with
       each extra TP/PP worker; CPU-bound layers when ``--enforce-eager``)
     + per layer: small kernels + linear layers as the root-sum-square of weight-read time and
       GEMM time (achieved bandwidth and FLOP/s, by weight dtype and GPU) + attention (decode:
       KV reads; prefill: FLOPs over the context) + 2 tensor-parallel all-reduces
       (``collectives.py``: latency + ring bytes over the slowest link, by interconnect and TP)
     + LM head and sampler for the sampled tokens + CPU-offloaded weights over PCIe
     + the speculative drafter's passes.
A request also spends ``request_overhead`` outside the steps before its first token (HTTP,
input processing, tokenisation, the hops between the API server and the engine core).

Per-GPU figures come from the GPU table (``latency_tuner.hardware``): achieved bandwidth of BF16
weight reads, sustained tensor clock (power-limited cards), SM count x clock. FP8 weight and FP8
KV reads are bounded by both the memory (half the bytes) and the SMs' rate of consuming and
converting FP8 bytes, calibrated on H100 (0.70 and 0.77 of its 3.35 TB/s, published); on an H200
the same SMs face 4.8 TB/s, so FP8 halves the bytes but not the time (its gain is smaller).

Everything is per GPU: a TP group runs in lock-step, PP stages run one after the other for a
single batch. Pure arithmetic: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from latency_tuner.perf.collectives import CollectiveModel, allreduce_seconds
from latency_tuner.perf.config import (
    GIB,
    EngineConfig,
    kv_bytes_per_token_per_gpu,
    weight_bytes_per_param,
)

__all__ = ["CostModel", "Efficiencies"]


@dataclass(frozen=True)
class Efficiencies:
    """Achieved fractions of the data-sheet peaks and fixed costs, from the published ranges
    (reference/effect_sizes.md). Benchmarks perturb these to test robustness.

    There is no explicit GEMM-efficiency-vs-tokens table: the root-sum-square of weight-read
    time and FLOP time at a constant ``gemm_*`` reproduces the published H100 curve (about 30%
    of peak at 128 tokens, 50% at 256, 65% at 512, 70%+ from 1024). Per-GPU factors (achieved
    BF16 weight-read bandwidth, sustained tensor clock) come from the GPU table.
    """

    weight_bw_bf16: float | None = None  # decode BF16 GEMV; None: the GPU's (0.70-0.78)
    # Bytes of FP8 weights / FP8 KV one SM consumes (and converts) per cycle: H100's published
    # achieved rates (FP8 weight reads at most 0.70 of 3.35 TB/s; FP8 KV at 0.55x the BF16 cost
    # per token, i.e. 0.77 of 3.35 TB/s) over its 132 SMs x 1.98 GHz.
    fp8_weight_bytes_per_sm_cycle: float = 9.0
    fp8_kv_bytes_per_sm_cycle: float = 9.9
    weight_bw_int4: float = 0.76  # Marlin W4A16 (also W8A16 on GPUs without FP8), on HBM3
    kv_bw: float = 0.85  # paged-attention KV reads
    gemm_bf16: float = 0.74  # large BF16 GEMMs: 0.61-0.91 of dense peak, at the sustained clock
    gemm_fp8: float = 0.52  # FP8 GEMMs: 0.50-0.60 of the FP8 peak
    gemm_dequant_factor: float = 0.90  # weight-only kernels: BF16 math after dequantisation
    attention_flops: float = 0.60  # FlashAttention prefill, fraction of BF16 peak
    small_kernels_per_layer: float = 7.0  # norms, rope, act, cache write, attention launch
    # Host time per step that the GPU waits for: scheduling, input preparation, sampling and
    # output processing (~0.8 ms with CUDA graphs), plus broadcasting the step to each further
    # TP/PP worker and gathering its result (~0.3 ms each).
    step_overhead_s: float = 0.8e-3
    worker_overhead_s: float = 0.3e-3
    per_seq_overhead_s: float = 2e-6  # per scheduled request (bookkeeping, detokenise)
    # A request's time outside the steps before its first token: HTTP parsing and validation
    # (~2 ms), input processing (~2 ms), the API server -> engine core -> API server hops
    # (~1 ms each), the first step of a new request (blocks, prefix hashes, persistent batch:
    # ~2 ms), detokenising and streaming the first chunk (~1 ms); plus tokenising and hashing
    # the prompt per token.
    request_overhead_s: float = 9e-3
    request_overhead_per_token_s: float = 2e-6
    eager_layer_cpu_s: float = 120e-6  # Python dispatch + ~12 launches per layer, no graphs
    eager_gpu_factor: float = 1.08  # no torch.compile fusion
    eager_unhidden: float = 0.3  # share of the shorter of CPU/GPU time not overlapped
    collectives: CollectiveModel = field(default_factory=CollectiveModel)
    offload_pcie_bw: float = 0.85  # CPU-offloaded weights streamed over the host link
    sampler_passes: float = 4.0  # fp32 logits read/written this often by the sampler
    draft_pass_overhead_s: float = 0.08e-3  # launch + sync per drafter pass
    spec_seq_overhead_s: float = 4e-6  # per draft token: proposal, rejection-sampler bookkeeping
    pp_send_latency_s: float = 20e-6


_HOPPER_BF16_READ = 0.78  # BF16 GEMV read fraction of the GPU the published figures come from


def _rss(a: float, b: float) -> float:
    return math.hypot(a, b)


class CostModel:
    """Step times for one engine configuration."""

    def __init__(self, config: EngineConfig, *, efficiencies: Efficiencies | None = None) -> None:
        self.config = config
        self.eff = efficiencies or Efficiencies()
        m, g, tp = config.model, config.gpu, config.tp
        e = self.eff
        self._layers = m.layers
        self._bw = g.hbm_tb_s * 1e12
        # Tensor-core work runs at the sustained clock (below boost on power-capped cards).
        self._bf16_peak = g.bf16_tflops * 1e12 * g.tensor_clock_factor
        bf16_bw_eff = e.weight_bw_bf16 if e.weight_bw_bf16 is not None else g.weight_bw_eff
        self._bf16_weight_bw = self._bw * bf16_bw_eff
        # Linear layers of all layers, one GPU's shard (PP stages run in sequence).
        linear_params = m.layers * m.linear_params_per_layer / tp
        self._linear_bytes = linear_params * weight_bytes_per_param(config.weight_dtype)
        self._linear_flops_per_token = 2.0 * linear_params
        offload = min(config.cpu_offload_gb * GIB * config.pp, self._linear_bytes)
        self._hbm_linear_bytes = self._linear_bytes - offload
        self._offload_s = offload / (g.pcie_gb_s * 1e9 * e.offload_pcie_bw)
        if config.weight_dtype == "bf16":
            self._weight_bw = self._bf16_weight_bw
            self._gemm_peak = self._bf16_peak * e.gemm_bf16
        elif config.weight_dtype == "fp8" and g.fp8_tflops is not None:
            sm_limit = g.sm_cycles_per_s * e.fp8_weight_bytes_per_sm_cycle
            self._weight_bw = min(self._bf16_weight_bw, sm_limit)
            self._gemm_peak = g.fp8_tflops * 1e12 * g.tensor_clock_factor * e.gemm_fp8
        else:  # INT4, or FP8 weight-only on GPUs without FP8 tensor cores (Marlin)
            # The published Marlin fraction is an H100's; scale it by this GPU's read fraction.
            self._weight_bw = self._bw * e.weight_bw_int4 * bf16_bw_eff / _HOPPER_BF16_READ
            self._gemm_peak = self._bf16_peak * e.gemm_bf16 * e.gemm_dequant_factor
        self._lm_head_params = m.lm_head_params / tp
        self._kv_per_token = kv_bytes_per_token_per_gpu(m, config.kv_dtype, tp, 1)
        self._kv_bw = self._bw * e.kv_bw
        if config.kv_dtype == "fp8":
            self._kv_bw = min(self._kv_bw, g.sm_cycles_per_s * e.fp8_kv_bytes_per_sm_cycle)
        self._attn_peak = self._bf16_peak * e.attention_flops
        # 4 FLOPs per (query, key) pair per head-dim element: QK^T and PV.
        self._attn_flops_per_pair = 4.0 * (m.heads / tp) * m.head_dim * m.layers
        self._small_kernels_s = m.layers * e.small_kernels_per_layer * g.kernel_overhead_us * 1e-6

    # --- public --------------------------------------------------------------------------------

    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes one token occupies on one GPU (all its layers)."""
        c = self.config
        return kv_bytes_per_token_per_gpu(c.model, c.kv_dtype, c.tp, c.pp)

    def tokens_per_decode_step_expected(self) -> float:
        """Mean tokens a decoding sequence gains per step: E = (1 - a^(k+1)) / (1 - a)."""
        spec = self.config.spec
        return 1.0 if spec is None else spec.expected_tokens_per_step

    def step_time(
        self,
        *,
        decode_contexts: Sequence[int],
        prefill_chunks: Sequence[tuple[int, int]],
        spec_tokens: int = 0,
        kernel_only: bool = False,
    ) -> float:
        """Seconds for one engine step.

        decode_contexts: context length of each decoding sequence. prefill_chunks:
        (chunk_tokens, tokens_already_in_context) per prefilling sequence. spec_tokens: draft
        tokens per decoding sequence verified this step (each then feeds k+1 tokens).
        """
        n_decode = len(decode_contexts)
        decode_tokens = n_decode * (spec_tokens + 1)
        prefill_tokens = sum(chunk for chunk, _ in prefill_chunks)
        tokens = decode_tokens + prefill_tokens
        if tokens == 0:
            return 0.0
        sampled = decode_tokens + len(prefill_chunks)
        gpu = (
            self._small_kernels_s
            + self.linear_time(tokens)
            + self.lm_head_time(sampled)
            + self._decode_attention_time(decode_contexts, spec_tokens + 1)
            + sum(self._prefill_attention_time(c, past) for c, past in prefill_chunks)
            + self.allreduce_time(tokens) * 2 * self._layers
            + self._pp_time(tokens)
            + self._offload_s
        )
        e = self.eff
        if self.config.enforce_eager:
            # No CUDA graphs: each layer's kernels are launched from Python. CPU and GPU run
            # asynchronously, but the GPU idles at the start of each step and between short
            # kernels, so only part of the shorter side is hidden.
            gpu_eager = gpu * e.eager_gpu_factor
            cpu = self._layers * e.eager_layer_cpu_s
            gpu = max(gpu_eager, cpu) + e.eager_unhidden * min(gpu_eager, cpu)
        draft = self._draft_time(n_decode, spec_tokens) if spec_tokens > 0 else 0.0
        if kernel_only:
            return gpu + draft
        workers = self.config.tp * self.config.pp - 1
        host = (
            e.step_overhead_s
            + e.worker_overhead_s * workers
            + e.per_seq_overhead_s * (n_decode + len(prefill_chunks))
        )
        return host + gpu + draft

    def request_overhead(self, prompt_tokens: int) -> float:
        """Seconds a request spends outside the engine's steps before its first token."""
        e = self.eff
        return e.request_overhead_s + e.request_overhead_per_token_s * prompt_tokens

    # --- parts (public for tests and what-if tools) ----------------------------------------------

    def linear_time(self, tokens: int) -> float:
        """QKV/O/MLP GEMMs of all layers for ``tokens`` tokens: weight reads vs FLOPs."""
        read = self._hbm_linear_bytes / self._weight_bw
        compute = tokens * self._linear_flops_per_token / self._gemm_peak
        return _rss(read, compute)

    def lm_head_time(self, sampled: int) -> float:
        """LM head (BF16) for the sampled positions, plus the sampler over the logits."""
        if sampled == 0:
            return 0.0
        read = self._lm_head_params * 2.0 / self._bf16_weight_bw
        compute = 2.0 * sampled * self._lm_head_params / (self._bf16_peak * self.eff.gemm_bf16)
        vocab = self.config.model.vocab
        sampler = sampled * vocab * 4.0 * self.eff.sampler_passes / (self._bw * self.eff.kv_bw)
        return _rss(read, compute) + sampler

    def allreduce_time(self, tokens: float) -> float:
        """One all-reduce of the hidden states of ``tokens`` tokens across the TP group."""
        message = tokens * self.config.model.hidden * 2.0
        return allreduce_seconds(message, self.config.tp, self.config.gpu, self.eff.collectives)

    # --- private -------------------------------------------------------------------------------

    def _decode_attention_time(self, contexts: Sequence[int], queries: int) -> float:
        if not contexts:
            return 0.0
        total = float(sum(contexts))
        read = total * self._kv_per_token / self._kv_bw
        compute = total * queries * self._attn_flops_per_pair / self._attn_peak
        return _rss(read, compute)

    def _prefill_attention_time(self, chunk: int, past: int) -> float:
        pairs = chunk * (past + (chunk + 1) / 2.0)  # causal: each new token sees past + earlier
        compute = pairs * self._attn_flops_per_pair / self._attn_peak
        read = (past + chunk) * self._kv_per_token / self._kv_bw
        return _rss(compute, read)

    def _pp_time(self, tokens: int) -> float:
        pp = self.config.pp
        if pp == 1:
            return 0.0
        message = tokens * self.config.model.hidden * 2.0
        link = self.config.gpu.link_gb_s * 1e9 * self.eff.collectives.nvlink_bw
        return (pp - 1) * (self.eff.pp_send_latency_s + message / link)

    def _draft_time(self, n_decode: int, k: int) -> float:
        spec = self.config.spec
        if spec is None:
            return 0.0
        per_pass = spec.draft_cost_fraction * (
            self.linear_time(n_decode) + self.lm_head_time(n_decode)
        )
        bookkeeping = self.eff.spec_seq_overhead_s * n_decode
        return k * (per_pass + self.eff.draft_pass_overhead_s + bookkeeping)
