"""The functional core takes time as a parameter: no module of api/, vllm/ or core/ reads a clock.

import-linter keeps clients out of these packages; this keeps clocks out, which import rules
cannot see (``datetime`` is imported for its types).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "operator" / "latency_tuner"
CLOCK_CALLS = re.compile(
    r"\b(datetime\.(now|utcnow|today)|date\.today|time\.(time|monotonic|perf_counter)(_ns)?)\s*\("
)
PURE = sorted(p for layer in ("api", "vllm", "core") for p in (PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_pure_module_reads_no_clock(path: Path) -> None:
    calls = [
        f"{n}: {line.strip()}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if CLOCK_CALLS.search(line)
    ]
    assert calls == []


def test_the_clock_pattern_catches_the_usual_calls() -> None:
    for text in ("datetime.now(UTC)", "time.time()", "time.monotonic()", "time.perf_counter_ns()"):
        assert CLOCK_CALLS.search(text), text
    assert not CLOCK_CALLS.search("def decide(now: datetime) -> None:")
