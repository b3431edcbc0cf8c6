from __future__ import annotations

import pytest

from latency_tuner.loadgen.prompts import PromptFactory


def test_every_prompt_has_the_asked_number_of_words() -> None:
    factory = PromptFactory(prompt_tokens=100, shared_prefix_tokens=30, seed=1)
    assert {factory.prompt(i).words for i in range(20)} == {100}


def test_the_shared_prefix_is_identical_and_the_rest_is_unique_per_request() -> None:
    factory = PromptFactory(prompt_tokens=64, shared_prefix_tokens=48, seed=3)
    prompts = [factory.prompt(i) for i in range(50)]
    assert {p.text.split()[:48] == factory.prefix.split() for p in prompts} == {True}
    assert len({p.suffix for p in prompts}) == 50


def test_the_same_seed_gives_the_same_prompts_and_another_seed_others() -> None:
    def first(seed: int) -> str:
        return PromptFactory(prompt_tokens=32, shared_prefix_tokens=8, seed=seed).prompt(5).text

    assert first(1) == first(1)
    assert first(1) != first(2)


def test_without_a_shared_prefix_prompts_share_no_fixed_start() -> None:
    factory = PromptFactory(prompt_tokens=16, seed=0)
    assert factory.prompt(0).prefix == ""
    assert factory.prompt(0).text.split()[:4] != factory.prompt(1).text.split()[:4]


@pytest.mark.parametrize(("tokens", "shared"), [(0, 0), (10, 10), (10, -1)])
def test_impossible_lengths_are_rejected(tokens: int, shared: int) -> None:
    with pytest.raises(ValueError, match="tokens"):
        PromptFactory(prompt_tokens=tokens, shared_prefix_tokens=shared)
