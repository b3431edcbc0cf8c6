"""The simulator's quality model: a lossy configuration changes a stated share of output words."""

from __future__ import annotations

import pytest

from latency_tuner.perf.quality import altered_share
from latency_tuner.simulator.tokenizer import encode, output_text, output_token_ids

PROMPTS = [encode(f"tell me about the sea and the mountains, question {i}") for i in range(200)]


def _differing(share: float) -> tuple[int, int]:
    differ = total = 0
    for prompt in PROMPTS:
        exact = output_text(prompt, 0, 50).split()
        lossy = output_text(prompt, 0, 50, share).split()
        differ += sum(a != b for a, b in zip(exact, lossy, strict=True))
        total += len(exact)
    return differ, total


@pytest.mark.parametrize("share", [0.01, 0.06, 0.3])
def test_about_the_stated_share_of_words_differ(share: float) -> None:
    differ, total = _differing(share)
    assert differ / total == pytest.approx(share, rel=0.25, abs=0.003)


def test_a_16_bit_configuration_answers_exactly_as_before() -> None:
    assert _differing(0.0) == (0, 10_000)


def test_the_same_prompt_gets_the_same_lossy_answer_every_time() -> None:
    assert output_text(PROMPTS[0], 0, 40, 0.3) == output_text(PROMPTS[0], 0, 40, 0.3)


def test_streamed_pieces_join_to_the_whole_lossy_answer() -> None:
    whole = output_text(PROMPTS[1], 0, 30, 0.3)
    pieces = "".join(output_text(PROMPTS[1], start, 5, 0.3) for start in range(0, 30, 5))
    assert pieces == whole
    assert encode(whole) == output_token_ids(PROMPTS[1], 0, 30, 0.3)


def test_a_larger_drift_alters_every_token_a_smaller_one_does() -> None:
    exact = output_text(PROMPTS[2], 0, 200).split()
    small = output_text(PROMPTS[2], 0, 200, 0.05).split()
    large = output_text(PROMPTS[2], 0, 200, 0.2).split()
    changed_small = {i for i, (a, b) in enumerate(zip(exact, small, strict=True)) if a != b}
    changed_large = {i for i, (a, b) in enumerate(zip(exact, large, strict=True)) if a != b}
    assert changed_small <= changed_large


def test_int4_weights_drift_more_than_fp8_and_16_bit_not_at_all() -> None:
    assert altered_share("bf16", "bf16") == 0.0
    assert 0.0 < altered_share("fp8", "bf16") < altered_share("int4", "bf16")
    assert altered_share("int4", "fp8") > altered_share("int4", "bf16")
    assert altered_share("int4", "fp8", override=0.5) == 0.5
    with pytest.raises(ValueError, match="within"):
        altered_share("bf16", "bf16", override=1.5)
