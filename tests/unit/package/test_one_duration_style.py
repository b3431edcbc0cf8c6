"""Every duration a user reads (status, conditions, events, CLI, reports) is written by one
function, ``api.durations.format_duration``, in Go's style: no module formats seconds by hand.

The vLLM stand-in, the bench client's millisecond tables, the benchmark harness and the real
engine runner print their own tool output and are not scanned.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "operator" / "latency_tuner"
NOT_SCANNED = ("simulator", "loadgen", "realengine", "convergence", "sandbox/podrunner")
NOT_SCANNED_FILES = ("cli/benchmark.py",)

# An f-string field with a float format followed by a time unit ("{x:.2f} s", "{y:g}ms"), or a
# value scaled to milliseconds by hand ("{x * 1000:.0f} ms").
HAND_FORMATTED = re.compile(
    r"\{[^{}]*:[^{}]*[fg]\} ?(?:s|ms|us|µs|sec|seconds|min|minutes)\b|\{[^{}]*\* ?1000[^{}]*\} ?ms"
)


def scanned_files() -> list[Path]:
    files = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(NOT_SCANNED) or relative in NOT_SCANNED_FILES:
            continue
        files.append(path)
    return files


def test_no_module_users_read_formats_a_duration_by_hand() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in scanned_files()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if HAND_FORMATTED.search(line)
    ]
    assert found == [], "use api.durations.format_duration:\n" + "\n".join(found)


def test_the_scan_recognises_each_old_style() -> None:
    # The three styles the issue saw, as they were written.
    assert HAND_FORMATTED.search('f"{seconds:.2f} s"')
    assert HAND_FORMATTED.search('f"{seconds * 1000:.0f} ms"')
    assert HAND_FORMATTED.search('f"within {timeout:g} s"')
    assert not HAND_FORMATTED.search('f"{format_duration(seconds)}"')
    assert len(scanned_files()) > 50
