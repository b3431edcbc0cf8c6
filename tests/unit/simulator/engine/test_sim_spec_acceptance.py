"""Speculative acceptance follows the method and how repetitive the text is, not a constant."""

from __future__ import annotations

import json

from tests.unit.simulator.engine.support import MODEL, words

from latency_tuner.perf.config import build_engine_config
from latency_tuner.simulator.acceptance import acceptance_rate, prompt_repetitiveness
from latency_tuner.simulator.engine import SimRequest, VirtualEngine
from latency_tuner.simulator.tokenizer import encode
from latency_tuner.vllm.args import VllmCommandLine


def test_a_prompt_without_repeats_scores_zero_and_a_repeated_one_close_to_one() -> None:
    novel = encode(words(400))
    repeated = encode(" ".join([words(20)] * 20))
    assert prompt_repetitiveness(novel) == 0.0
    assert prompt_repetitiveness(repeated) > 0.9


def test_ngram_drafting_accepts_little_on_novel_text_and_much_on_repeated_text() -> None:
    assert acceptance_rate("ngram", 0.4, 0.0) < 0.15
    assert acceptance_rate("ngram", 0.4, 1.0) > 0.75


def test_a_model_drafter_keeps_its_typical_rate_on_novel_text_and_gains_on_repeats() -> None:
    assert acceptance_rate("eagle3", 0.65, 0.0) == 0.65
    assert 0.65 < acceptance_rate("eagle3", 0.65, 0.5) < acceptance_rate("eagle3", 0.65, 1.0)


def _accepted_share(prompt: str, method: str, spec_acceptance: float | None = None) -> float:
    """Output tokens per step that emitted tokens, for one 400-token request."""
    spec = json.dumps({"method": method, "num_speculative_tokens": 3})
    line = VllmCommandLine.parse(None, [MODEL, "--speculative-config", spec])
    config = build_engine_config(line, gpu="H100-SXM", num_gpus=1, spec_acceptance=spec_acceptance)
    engine = VirtualEngine(config, seed=1)
    (record,) = engine.run_requests([SimRequest(encode(prompt), 400)])
    steps = len(set(record.token_times))
    return record.num_output_tokens / steps


def test_the_engine_emits_more_tokens_per_step_for_a_repetitive_prompt() -> None:
    novel = _accepted_share(words(400), "ngram")
    repeated = _accepted_share(" ".join([words(20)] * 20), "ngram")
    assert novel < 1.3
    assert repeated > 2.0


def test_a_fixed_acceptance_rate_overrides_the_workload() -> None:
    fixed = _accepted_share(words(400), "ngram", spec_acceptance=0.8)
    assert fixed > 2.0
