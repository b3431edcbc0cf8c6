"""Speculative-decoding acceptance from the method and the workload.

A draft token is accepted when the target model would have produced it. How often depends on
what is being generated: text that repeats what is already in the context (code edits,
extraction, RAG answers quoting their sources, multi-turn chat carrying earlier turns) is easy
to predict, free-form text is not. The prompt's repetitiveness stands for it here: the share of
its 4-grams that already occurred earlier in it.
- n-gram (prompt lookup) drafting proposes only continuations seen in the context, so its
  acceptance follows repetitiveness almost entirely: ~0.1 on novel text, ~0.8 on text that is
  mostly repeated;
- model drafters (EAGLE, MTP, Medusa, a draft model) have a typical acceptance on chat traffic
  (0.5-0.8 by method, ``config._SPEC_DEFAULTS``) that rises toward 0.9 as the text repeats.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["acceptance_rate", "prompt_repetitiveness"]

_N = 4
_NGRAM_FLOOR = 0.10
_NGRAM_CEILING = 0.80
_MODEL_CEILING = 0.90


def prompt_repetitiveness(tokens: Sequence[int]) -> float:
    """Share of the prompt's 4-grams that occurred earlier in it (0: none repeat)."""
    total = len(tokens) - _N + 1
    if total <= 1:
        return 0.0
    seen: set[tuple[int, ...]] = set()
    repeats = 0
    for i in range(total):
        gram = tuple(tokens[i : i + _N])
        if gram in seen:
            repeats += 1
        else:
            seen.add(gram)
    return repeats / total


def acceptance_rate(method: str, typical: float, repetitiveness: float) -> float:
    """Per-draft-token acceptance for ``method`` on a prompt this repetitive."""
    r = min(1.0, max(0.0, repetitiveness))
    if method == "ngram":
        return _NGRAM_FLOOR + (_NGRAM_CEILING - _NGRAM_FLOOR) * r
    return typical + (max(typical, _MODEL_CEILING) - typical) * r
