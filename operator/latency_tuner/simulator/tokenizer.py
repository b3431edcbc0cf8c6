"""A deterministic pseudo-tokenizer over real text, so that prefix caching sees real prefixes.

Rules (documented, stable, shared with ``latency_tuner.loadgen.prompts``):
- one token per whitespace-separated word; a word longer than ``MAX_PIECE`` characters is split
  every ``MAX_PIECE`` characters (a real BPE splits long words too);
- a token id is a stable hash (blake2b) of the piece, folded into a 128k vocabulary, so the same
  text always gives the same ids and a shared text prefix gives a shared id prefix;
- chat: each message is ``<|im_start|> ROLE <content tokens> <|im_end|>``; the generation prompt
  ``<|im_start|> assistant`` follows (role markers are tokens of their own);
- output: deterministic pseudo-words, one per token, chosen from the request's prompt and the
  token's position (no model, no sampling); a lossy configuration replaces a share of them
  (``altered``, see ``perf.quality``), the same tokens for the same prompt every time.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

__all__ = [
    "MAX_PIECE",
    "VOCAB_SIZE",
    "encode",
    "encode_chat",
    "output_ids_from_seed",
    "output_seed",
    "output_text",
    "output_token_ids",
    "token_id",
]

MAX_PIECE = 12
VOCAB_SIZE = 128_000
_IM_START = "<|im_start|>"
_IM_END = "<|im_end|>"

_OUTPUT_WORDS_TEXT = """
    the of and to in is was for on that with as it by at from his an were are which this be has had
    one new first also their after who its but two her they she been other when there all during
    into school time may years more most only over city some world would where later up such used
    many can state about national out known university united then made
"""
_OUTPUT_WORDS: tuple[str, ...] = tuple(_OUTPUT_WORDS_TEXT.split())


@lru_cache(maxsize=65536)
def token_id(piece: str) -> int:
    """The id of one piece of text (stable across processes and runs)."""
    digest = hashlib.blake2b(piece.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % VOCAB_SIZE


def _pieces(text: str) -> Iterable[str]:
    for word in text.split():
        if len(word) <= MAX_PIECE:
            yield word
        else:
            for start in range(0, len(word), MAX_PIECE):
                yield word[start : start + MAX_PIECE]


def encode(text: str) -> list[int]:
    """Token ids of ``text``: one per word (long words split every ``MAX_PIECE`` chars)."""
    return [token_id(piece) for piece in _pieces(text)]


def _content_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type", "text") == "text"
        ]
        return " ".join(texts)
    raise ValueError(f"unsupported message content: {type(content).__name__}")


def encode_chat(
    messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True
) -> list[int]:
    """Token ids of a chat conversation under the simple template in the module docstring."""
    ids: list[int] = []
    start, end = token_id(_IM_START), token_id(_IM_END)
    for message in messages:
        role = str(message.get("role", "user"))
        ids.append(start)
        ids.append(token_id(role))
        ids.extend(encode(_content_text(message.get("content"))))
        ids.append(end)
    if add_generation_prompt:
        ids.append(start)
        ids.append(token_id("assistant"))
    return ids


_OUTPUT_IDS: tuple[int, ...] = tuple(token_id(w) for w in _OUTPUT_WORDS)


def output_seed(prompt_ids: Sequence[int]) -> int:
    """A cheap, stable summary of a prompt that picks its output words."""
    tail = prompt_ids[-4:] if prompt_ids else ()
    return (len(prompt_ids) * 1_000_003 + sum(tail)) % 1_000_000_007


def _altered(seed: int, position: int, altered: float) -> int:
    """0 when the token at ``position`` is the 16-bit model's, else an offset in 1..n-1 that
    swaps it for another word. A splitmix-style mix of (seed, position): deterministic, and a
    larger share alters a superset of the tokens a smaller one does."""
    if altered <= 0.0:
        return 0
    mask = 0xFFFFFFFFFFFFFFFF
    x = (seed * 0x9E3779B97F4A7C15 + (position + 1) * 0xD1B54A32D192ED03) & mask
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
    x ^= x >> 31
    if (x >> 11) / float(1 << 53) >= altered:
        return 0
    return 1 + (x & 0xFFFF) % (len(_OUTPUT_WORDS) - 1)


def output_text(prompt_ids: Sequence[int], start: int, count: int, altered: float = 0.0) -> str:
    """The text of output tokens ``start .. start+count-1``: " word" per token."""
    seed = output_seed(prompt_ids)
    words = _OUTPUT_WORDS
    n = len(words)
    return "".join(
        " " + words[(seed + 7 * i + _altered(seed, i, altered)) % n]
        for i in range(start, start + count)
    )


def output_token_ids(
    prompt_ids: Sequence[int], start: int, count: int, altered: float = 0.0
) -> list[int]:
    """The ids of the same output tokens (``encode(output_text(...))`` gives them back)."""
    return output_ids_from_seed(output_seed(prompt_ids), start, count, altered)


def output_ids_from_seed(seed: int, start: int, count: int, altered: float = 0.0) -> list[int]:
    ids = _OUTPUT_IDS
    n = len(ids)
    if count == 1 and altered <= 0.0:
        return [ids[(seed + 7 * start) % n]]
    return [
        ids[(seed + 7 * i + _altered(seed, i, altered)) % n] for i in range(start, start + count)
    ]
