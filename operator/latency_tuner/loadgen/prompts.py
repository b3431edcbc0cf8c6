"""Deterministic synthetic prompts whose length is counted in words. Pure.

One token is taken to be one whitespace-separated word (the simulator's pseudo-tokenizer counts
the same way; a real tokenizer gives roughly 1.3 tokens per word of this vocabulary). A prompt
of P tokens with a shared prefix of K is K words identical for every request (a fixed "system
prompt", drawn once from the seed) followed by P-K words drawn from a per-request seed, so the
unique part is unique and reproducible run to run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# Short common English words: realistic text for real tokenizers, 1 word = 1 pseudo-token.
_WORDS = """
    time year people way day man thing woman life child world school state family student group
    country problem hand part place case week company system program question work government
    number night point home water room mother area money story fact month lot right study book
    eye job word business issue side kind head house service friend father power hour game line
    end member law car city community name president team minute idea kid body information back
    parent face others level office door health person art war history party result change
    morning reason research girl guy moment air teacher force education foot boy age policy
    process music market sense nation plan college interest death experience effect use class
    control care field development role effort rate heart drug show leader light voice wife
    police mind price report decision son view relationship town road arm difference value
    building action model season society tax director position player record paper space ground
    form event official matter center couple site project activity star table need court oil
    situation cost industry figure street image phone data picture practice piece land product
    doctor wall patient worker news test movie north love support technology step baby computer
    type attention film tree source organization hair window evidence population truth song
    river stone garden bridge cloud summer winter autumn spring letter signal engine window
    quick bright quiet simple early late green blue small large happy ready clear strong
"""
_VOCABULARY: tuple[str, ...] = tuple(dict.fromkeys(_WORDS.split()))


@dataclass(frozen=True)
class Prompt:
    """The shared part (possibly empty) and the part unique to one request."""

    prefix: str
    suffix: str

    @property
    def text(self) -> str:
        return f"{self.prefix} {self.suffix}" if self.prefix else self.suffix

    @property
    def words(self) -> int:
        return len(self.text.split())


def _words(rng: random.Random, count: int) -> list[str]:
    return rng.choices(_VOCABULARY, k=count)


class PromptFactory:
    """Prompt number i of a run: same (tokens, shared, seed, i) -> same prompt, always."""

    def __init__(self, *, prompt_tokens: int, shared_prefix_tokens: int = 0, seed: int = 0):
        if prompt_tokens < 1:
            raise ValueError("prompt_tokens must be >= 1")
        if not 0 <= shared_prefix_tokens < prompt_tokens:
            raise ValueError("shared_prefix_tokens must be >= 0 and < prompt_tokens")
        self._unique = prompt_tokens - shared_prefix_tokens
        self._seed = seed
        self._prefix = " ".join(_words(random.Random(f"prefix:{seed}"), shared_prefix_tokens))

    @property
    def prefix(self) -> str:
        return self._prefix

    def prompt(self, index: int) -> Prompt:
        # A string seed is hashed with SHA-512 by random.Random: stable across processes.
        rng = random.Random(f"request:{self._seed}:{index}")
        return Prompt(prefix=self._prefix, suffix=" ".join(_words(rng, self._unique)))
