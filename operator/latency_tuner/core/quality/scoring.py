"""One answer's score in [0, 1] under the metric a LatencyTarget's quality gate names."""

from __future__ import annotations

import difflib
import enum
import re
import unicodedata
from decimal import Decimal, InvalidOperation


class Metric(enum.StrEnum):
    """How an answer is compared with what it should be."""

    EXACT_MATCH = "ExactMatch"
    """1 when both texts are equal after Unicode, case and whitespace normalisation, else 0."""
    SIMILARITY = "Similarity"
    """The share of matching words (difflib's ratio over word sequences), for free text."""
    ANSWER = "Answer"
    """1 when the final number of both texts is equal, for maths-style prompts (GSM8K's
    ``#### 42`` convention first, else the last number in the text)."""


_WORD = re.compile(r"\w+", re.UNICODE)
# A GSM8K-style marked answer, then any number: sign, thousands separators, decimals.
_MARKED = re.compile(r"####\s*(-?[\d,]*\.?\d+)")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def _normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _words(text: str) -> list[str]:
    return _WORD.findall(_normalise(text))


def extract_answer(text: str) -> Decimal | None:
    """The final numeric answer of a reply, or None when it states none.

    A ``#### n`` marker wins (the model was asked for it); otherwise the last number, because
    worked solutions state intermediate figures before the result.
    """
    marked = _MARKED.findall(text)
    found = marked[-1:] or _NUMBER.findall(text)[-1:]
    if not found:
        return None
    try:
        return Decimal(found[0].replace(",", ""))
    except InvalidOperation:
        return None


def score(metric: Metric, expected: str, answer: str) -> float:
    """How well ``answer`` matches ``expected`` under ``metric``, in [0, 1]."""
    if metric is Metric.EXACT_MATCH:
        return 1.0 if _normalise(expected) == _normalise(answer) else 0.0
    if metric is Metric.SIMILARITY:
        want, got = _words(expected), _words(answer)
        if not want and not got:
            return 1.0
        # autojunk off: its popularity heuristic would drop frequent words in long answers.
        return difflib.SequenceMatcher(None, want, got, autojunk=False).ratio()
    wanted = extract_answer(expected)
    return 1.0 if wanted is not None and wanted == extract_answer(answer) else 0.0
