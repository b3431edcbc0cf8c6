"""The load a window saw, per pod: the signals the knobs' expected gains depend on.

``Load.of(observation)`` divides the pod-summed running and waiting counts by the number of
pods; request shape (prompt and output tokens) and KV usage are already per request or per
pod. Read by the diagnosis (is the slot limit or the KV cache binding?), the advice and each
knob's options (speculative decoding only at low concurrency, FP8 KV only with long contexts).
Values only, no decisions. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from latency_tuner.core.observation import Observation

KV_FULL = 0.9  # KV-cache usage at peak: admission is limited by free blocks


@dataclass(frozen=True)
class Load:
    """The load signals the gains depend on, per pod (the metrics are summed over pods)."""

    running: float | None = None
    running_peak: float | None = None
    waiting: float | None = None
    waiting_peak: float | None = None
    kv_usage_peak: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    prefill_seconds: float | None = None  # mean prefill time of a request
    decode_seconds: float | None = None  # mean decode time of a request

    @classmethod
    def of(cls, observation: Observation) -> Load:
        pods = max(observation.pods, 1)

        def per_pod(value: float | None) -> float | None:
            return None if value is None else value / pods

        return cls(
            running=per_pod(observation.running_mean),
            running_peak=per_pod(observation.running_max),
            waiting=per_pod(observation.waiting_mean),
            waiting_peak=per_pod(observation.waiting_max),
            kv_usage_peak=observation.kv_cache_usage_max,
            prompt_tokens=observation.prompt_tokens_mean,
            generation_tokens=observation.generation_tokens_mean,
            prefill_seconds=observation.prefill_time_mean,
            decode_seconds=observation.decode_time_mean,
        )

    @property
    def prefill_share(self) -> float | None:
        """Prefill's part of a request's time on the GPU (prefill + decode); None if unknown."""
        if self.prefill_seconds is None or self.decode_seconds is None:
            return None
        busy = self.prefill_seconds + self.decode_seconds
        return None if busy <= 0 else self.prefill_seconds / busy

    @property
    def context_tokens(self) -> float | None:
        """Mean tokens in a running request's context (prompt plus half the output)."""
        if self.prompt_tokens is None:
            return None
        return self.prompt_tokens + (self.generation_tokens or 0.0) / 2

    def at_max_seqs(self, max_num_seqs: int) -> bool:
        """The slot limit binds: running reached it at peak; or requests wait while those in
        flight (running + waiting, per pod) outnumber the slots, on average or at the busiest
        with free KV blocks (so the blocks were not what kept them waiting).

        Evidence, not a fraction of the limit: a sampled gauge can miss the instant every slot
        was taken (a fixed "within 10%" gate then blocked the one move that helped), while
        requests that wait although admitting them all would still exceed max-num-seqs show
        the limit binds whatever the sampled peak.
        """
        if self.running_peak is not None and self.running_peak >= max_num_seqs:
            return True
        waiting, running = self.waiting or 0.0, self.running or 0.0
        if waiting > 0 and running + waiting >= max_num_seqs:
            return True
        peak_waiting, peak_running = self.waiting_peak or 0.0, self.running_peak or 0.0
        return peak_waiting > 0 and peak_running + peak_waiting >= max_num_seqs and not self.kv_full

    @property
    def kv_full(self) -> bool:
        return self.kv_usage_peak is not None and self.kv_usage_peak >= KV_FULL
