"""Duration strings ("500ms", "30s", "2m", "1h", "1m30s") and RFC 3339 timestamps.

Durations are read like Go's ``time.Duration`` (so Kubernetes CEL's ``duration()`` reads the
same text), restricted to the units a latency target needs, in the order h, m, s, ms, and
written exactly as Go prints them ("2.425s", "6m45.881s"), as kubectl users read durations.
Pure functions only: no clock is ever read here.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

# One number per unit, largest unit first; each part optional (an empty string is caught apart).
# Written for both Python `re` and RE2 (Kubernetes evaluates CRD patterns with RE2): no lookahead.
# At most six digits before the point: 999999h still fits Go's time.Duration (and so CEL's
# duration()), where a longer number would overflow it and every date computed from it.
_NUMBER = r"[0-9]{1,6}(?:\.[0-9]{1,9})?"
_ANY_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_TOO_LONG = re.compile(rf"^({_ANY_NUMBER}h)?({_ANY_NUMBER}m)?({_ANY_NUMBER}s)?({_ANY_NUMBER}ms)?$")
DURATION_PATTERN = rf"^({_NUMBER}h)?({_NUMBER}m)?({_NUMBER}s)?({_NUMBER}ms)?$"
_DURATION = re.compile(DURATION_PATTERN)
_UNIT_SECONDS = (3600.0, 60.0, 1.0, 0.001)

DURATION_EXAMPLES = '"500ms", "30s", "2m", "1h" or "1m30s"'


def parse_duration(text: str) -> float:
    """Seconds in a duration string such as "500ms", "2m" or "1m30s".

    Raises ``ValueError`` with a message meant for the person who wrote the text.
    """
    if isinstance(text, str) and text.strip().startswith("-"):
        raise ValueError(f"{text!r} is negative: a duration is zero or more")
    match = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None and isinstance(text, str) and _TOO_LONG.fullmatch(text.strip()):
        raise ValueError(f"{text!r} is too large: at most six digits per unit")
    if match is None or not any(match.groups()):
        raise ValueError(f"{text!r} is not a duration: {_suggestion(text)}")
    seconds = 0.0
    for part, unit in zip(match.groups(), _UNIT_SECONDS, strict=True):
        if part:
            # Strip the unit letters; what remains is the number.
            seconds += float(part.rstrip("hms")) * unit
    return seconds


_SPELLED_OUT = re.compile(
    r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|milliseconds?|msecs?|s|secs?|seconds?|m|mins?|minutes?|"
    r"h|hrs?|hours?)\s*",
    re.IGNORECASE,
)


def _suggestion(text: object) -> str:
    # "5 minutes" -> "write 5m": the fix, not just the rule.
    spelled = _SPELLED_OUT.fullmatch(text) if isinstance(text, str) else None
    if spelled:
        number, word = spelled.group(1), spelled.group(2).lower()
        unit = "ms" if word.startswith("ms") or word.startswith("milli") else word[0]
        return f"write {number}{unit}"
    return f"write a number with a unit (h, m, s, ms), e.g. {DURATION_EXAMPLES}"


def format_duration(seconds: float) -> str:
    """``seconds`` as Go's ``time.Duration`` prints it: "2.425s", "6m45.881s", "1h0m0s",
    "412ms", "1.5ms", "250µs", "0s" — the one style for every duration a user reads.

    At most three decimals: to the millisecond from one second up, to the microsecond below.
    A negative value gets a leading "-" (for display only: parse_duration accepts none).
    """
    if not math.isfinite(seconds):
        raise ValueError(f"cannot format {seconds!r} as a duration")
    sign = "-" if seconds < 0 else ""
    micros = round(abs(seconds) * 1_000_000)
    if micros == 0:
        return "0s"
    if micros < 1000:
        return f"{sign}{micros}µs"
    if micros < 1_000_000:
        return f"{sign}{_decimal(micros, 1000)}ms"
    millis = round(micros / 1000)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    text = f"{_decimal(millis, 1000)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"  # Go keeps inner zeros: "1h0m5s", "2m0s"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(count: int, per_unit: int) -> str:
    # 2425 thousandths -> "2.425", 1500 -> "1.5", 2000 -> "2": Go trims trailing zeros.
    whole, part = divmod(count, per_unit)
    digits = len(str(per_unit)) - 1
    fraction = f"{part:0{digits}d}".rstrip("0")
    return f"{whole}.{fraction}" if fraction else str(whole)


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC to the second, as Kubernetes writes ``metav1.Time`` ("2026-12-02T08:54:46Z").

    A naive datetime is refused: guessing its zone is how clocks drift apart.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"timestamp {moment!r} has no time zone; pass an aware datetime")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> datetime:
    """An aware datetime from an RFC 3339 string (a "Z" suffix or a numeric offset)."""
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not an RFC 3339 timestamp like 2026-12-02T08:54:46Z"
        ) from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone; write it like 2026-12-02T08:54:46Z")
    return moment
