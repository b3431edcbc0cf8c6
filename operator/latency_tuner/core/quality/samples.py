"""The quality gate's prompts, as a tenant writes them in a ConfigMap: parsed and bounded.

The ConfigMap belongs to the tenant, so nothing in it is trusted: its size, the number of
prompts and each prompt's length are capped, and anything but a JSON list of objects with a
string ``prompt`` (and, in mode Expected, a string ``expected``) is refused with a message that
says what to fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MAX_SAMPLES_BYTES = 256 * 1024
MAX_SAMPLES = 200
MAX_PROMPT_CHARS = 16 * 1024


class InvalidSamples(ValueError):
    """The ConfigMap's samples cannot be used; the message says why, for the status."""


@dataclass(frozen=True)
class Sample:
    prompt: str
    expected: str | None


def parse_samples(text: str, *, need_expected: bool) -> list[Sample]:
    """The samples of ``text`` (the ConfigMap value), or ``InvalidSamples``."""
    if len(text.encode()) > MAX_SAMPLES_BYTES:
        raise InvalidSamples(f"the samples are larger than {MAX_SAMPLES_BYTES // 1024} KiB")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidSamples(f"the samples are not JSON: {exc}") from None
    if not isinstance(data, list) or not data:
        raise InvalidSamples('the samples must be a non-empty JSON list of {"prompt": ...}')
    if len(data) > MAX_SAMPLES:
        raise InvalidSamples(f"{len(data)} samples, at most {MAX_SAMPLES} allowed")
    samples = []
    for i, item in enumerate(data):
        prompt = item.get("prompt") if isinstance(item, dict) else None
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidSamples(f"sample {i}: needs a non-empty string prompt")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise InvalidSamples(f"sample {i}: prompt longer than {MAX_PROMPT_CHARS} characters")
        expected = item.get("expected")
        if expected is not None and not isinstance(expected, str):
            raise InvalidSamples(f"sample {i}: expected must be a string")
        if need_expected and expected is None:
            raise InvalidSamples(
                f"sample {i}: mode Expected needs an expected answer (or use mode Reference)"
            )
        samples.append(Sample(prompt, expected))
    return samples
