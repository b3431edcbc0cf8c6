"""The quality gate's samples as a tenant writes them: parsed, bounded, refused in words."""

from __future__ import annotations

import json

import pytest

from latency_tuner.core.quality.samples import (
    MAX_PROMPT_CHARS,
    MAX_SAMPLES,
    MAX_SAMPLES_BYTES,
    InvalidSamples,
    Sample,
    parse_samples,
)


def test_prompts_with_expected_answers_are_read_in_order() -> None:
    text = json.dumps([{"prompt": "2+2?", "expected": "4"}, {"prompt": "3+3?", "expected": "6"}])
    assert parse_samples(text, need_expected=True) == [Sample("2+2?", "4"), Sample("3+3?", "6")]


def test_reference_mode_needs_prompts_only() -> None:
    assert parse_samples('[{"prompt": "hello"}]', need_expected=False) == [Sample("hello", None)]


@pytest.mark.parametrize(
    ("text", "need_expected", "says"),
    [
        ("not json", False, r"not valid JSON \(line 1, column 1\)"),
        ("{}", False, "non-empty JSON list"),
        ("[]", False, "non-empty JSON list"),
        ('[{"prompt": ""}]', False, "sample 0: needs a non-empty string prompt"),
        ('[{"prompt": "a"}, {"text": "b"}]', False, "sample 1"),
        ('[{"prompt": "a", "expected": 4}]', False, "expected must be a string"),
        ('[{"prompt": "a"}]', True, "mode Expected needs an expected answer"),
    ],
)
def test_unusable_samples_are_refused_saying_what_to_fix(
    text: str, need_expected: bool, says: str
) -> None:
    with pytest.raises(InvalidSamples, match=says):
        parse_samples(text, need_expected=need_expected)


def test_samples_over_the_caps_are_refused_before_use() -> None:
    many = json.dumps([{"prompt": "p"}] * (MAX_SAMPLES + 1))
    long = json.dumps([{"prompt": "p" * (MAX_PROMPT_CHARS + 1)}])
    huge = json.dumps([{"prompt": "p" * 1000}] * (MAX_SAMPLES_BYTES // 1000 + 1))
    with pytest.raises(InvalidSamples, match="at most"):
        parse_samples(many, need_expected=False)
    with pytest.raises(InvalidSamples, match="prompt longer"):
        parse_samples(long, need_expected=False)
    with pytest.raises(InvalidSamples, match="larger than"):
        parse_samples(huge, need_expected=False)


@pytest.mark.parametrize(
    "text",
    [
        '[{"prompt": "hunter2\\q"}]',  # an invalid escape: the decoder may quote it
        '[{"prompt": "hunter2\\u12"}]',
        '[{"prompt": "hunter2"}, hunter2]',
        '{"hunter2": 1',
        "[" * 100_000 + "hunter2",  # deeper than the decoder's recursion limit
    ],
)
def test_text_that_is_not_json_is_refused_without_quoting_any_of_it(text: str) -> None:
    with pytest.raises(InvalidSamples, match="not valid JSON") as refused:
        parse_samples(text, need_expected=False)
    assert "hunter2" not in str(refused.value)
    assert "\\" not in str(refused.value)
