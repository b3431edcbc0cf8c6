"""The demo's progress line names every argument a trial changes, never "None"."""

from __future__ import annotations

import io
import time

from latency_tuner.sandbox.demo import Progress


def line_for(trial: dict[str, object]) -> str:
    out = io.StringIO()
    Progress(out, {}, time.monotonic())({"phase": "Measuring", "currentTrial": trial})
    return out.getvalue()


def test_a_trial_with_a_companion_flag_shows_both_arguments() -> None:
    changes = [
        "--enable-chunked-prefill: false -> true",
        "--max-num-batched-tokens: (absent) -> 2048",
    ]
    text = line_for({"id": 1, "knob": "chunkedPrefill", "from": "false", "to": "true",
                     "changes": changes})  # fmt: skip
    assert "trial 1: --enable-chunked-prefill: false -> true; --max-num-batched-tokens:" in text


def test_a_trial_from_an_absent_flag_says_default_not_none() -> None:
    text = line_for({"id": 2, "knob": "maxNumBatchedTokens", "from": None, "to": "16384"})
    assert "maxNumBatchedTokens (default) -> 16384" in text
    assert "None" not in text
