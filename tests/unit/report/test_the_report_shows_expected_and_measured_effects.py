"""The report's trial table says what each trial was expected to do and what it did."""

from __future__ import annotations

from latency_tuner.report.render import trial_table


def test_each_trial_row_shows_the_expected_and_the_measured_change_per_objective() -> None:
    trials = [
        {
            "id": 1, "knob": "maxNumSeqs", "from": "16", "to": "32", "verdict": "Keep",
            "before": {"ttftSeconds": 2.0}, "after": {"ttftSeconds": 0.9},
            "predictions": [
                {"objective": "ttft", "expectedChange": -0.3, "measuredChange": -0.55},
                {"objective": "itl", "expectedChange": -0.1},
            ],
        },
        {"id": 2, "knob": "enablePrefixCaching", "to": "true"},
    ]  # fmt: skip
    head, _, kept, running = trial_table(trials, ["ttft"])
    assert head.endswith("| TTFT before | TTFT after | predicted effect | verdict |")
    expected = "TTFT expected -30%, measured -55%; ITL expected -10%"
    assert kept == f"| 1 | maxNumSeqs | 16 | 32 | 2s | 900ms | {expected} | Keep |"
    assert running.endswith("| - | running |")  # a trial from before predictions: none shown


def test_a_prediction_the_report_cannot_read_is_left_out_not_a_crash() -> None:
    trials = [{"id": 1, "knob": "maxNumSeqs", "predictions": [{"objective": "latency"}]}]
    assert trial_table(trials, [])[2].endswith("| - | running |")
