"""The quality gate's prompts, as a tenant writes them in a ConfigMap: parsed and bounded.

The ConfigMap belongs to the tenant, so nothing in it is trusted: its size, the number of
prompts and each prompt's length are capped, and anything but a JSON list of objects with a
string ``prompt`` (and, in mode Expected, a string ``expected``) is refused with a message that
says what to fix. A message names positions and counts, never a byte of the value: the
ConfigMap's text must not reach the status, an event or a log through an error.

A ConfigMap is used at all only when it carries ``SAMPLES_LABEL: "true"``: the operator may
read every ConfigMap of a namespace, a LatencyTarget's author may not, and the samples go to the
author's own pods. Whoever can label a ConfigMap can edit it, so already has its contents; the
label is that person lending it to the quality gate (``opted_in``; the adapter that reads the
ConfigMap checks it before looking at its data).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

# On a ConfigMap: its data may be sent as prompts to the pods of LatencyTargets in its namespace.
SAMPLES_LABEL = "latencytuner.io/quality-samples"
SAMPLES_LABEL_VALUE = "true"
MAX_SAMPLES_BYTES = 256 * 1024
MAX_SAMPLES = 200
MAX_PROMPT_CHARS = 16 * 1024


class InvalidSamples(ValueError):
    """The ConfigMap's samples cannot be used; the message says why, for the status."""


def opted_in(labels: Mapping[str, str] | None) -> bool:
    """True when a ConfigMap's ``labels`` lend it to the quality gate."""
    return (labels or {}).get(SAMPLES_LABEL) == SAMPLES_LABEL_VALUE


def not_lent_message(namespace: str, name: str) -> str:
    """Why a ConfigMap that is missing or does not opt in is not used: one message for both,
    so the gate tells a LatencyTarget's author nothing about ConfigMaps they may not read."""
    return (
        f"ConfigMap {name} in namespace {namespace} is missing or not labelled "
        f"{SAMPLES_LABEL}={SAMPLES_LABEL_VALUE}; the quality gate reads only ConfigMaps "
        "that opt in with that label"
    )


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
    except json.JSONDecodeError as exc:
        # Where, never what: the decoder's own message may quote the text.
        where = f"line {exc.lineno}, column {exc.colno}"
        raise InvalidSamples(f"the samples are not valid JSON ({where})") from None
    except (ValueError, RecursionError):
        raise InvalidSamples("the samples are not valid JSON (or nest too deeply)") from None
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
