"""The demo's report: a Markdown page with the trial table and the final arguments, a PNG of
TTFT and ITL per trial against the targets, and the JSON summary.

Built from the LatencyTarget's status as the operator left it: the report shows what a user
would read with ``kubectl get lt -o yaml``, nothing computed on the side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from latency_tuner.api.durations import format_duration


@dataclass
class DemoResult:
    scenario: str
    description: str
    targets_met: bool
    phase: str
    trials: list[dict[str, Any]]
    initial_args: list[str]
    final_args: list[str]
    observed: dict[str, Any]
    objectives: dict[str, Any]
    duration_seconds: float
    expectations_held: bool
    problems: list[str] = field(default_factory=list)
    events: list[dict[str, str]] = field(default_factory=list)
    diagnosis: dict[str, Any] = field(default_factory=dict)
    metrics_source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "targetsMet": self.targets_met,
            "phase": self.phase,
            "trials": [
                {
                    "id": t.get("id"),
                    "knob": t.get("knob"),
                    "from": t.get("from"),
                    "to": t.get("to"),
                    "before": t.get("before"),
                    "after": t.get("after"),
                    "verdict": t.get("verdict"),
                    "reason": t.get("reason"),
                }
                for t in self.trials
            ],
            "initialArgs": self.initial_args,
            "finalArgs": self.final_args,
            "observed": self.observed,
            "objectives": self.objectives,
            "diagnosis": self.diagnosis,
            "durationSeconds": round(self.duration_seconds, 1),
            "expectationsHeld": self.expectations_held,
            "problems": self.problems,
            "metricsSource": self.metrics_source,
        }


def _seconds(value: Any) -> str:
    return "-" if value is None else format_duration(float(value))


def trial_table(trials: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [
        "| # | knob | from | to | TTFT before | TTFT after | ITL before | ITL after | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in trials:
        before, after = t.get("before") or {}, t.get("after") or {}
        lines.append(
            f"| {t.get('id')} | {t.get('knob')} | {t.get('from') or '(default)'} | "
            f"{t.get('to') or '(removed)'} | {_seconds(before.get('ttftSeconds'))} | "
            f"{_seconds(after.get('ttftSeconds'))} | {_seconds(before.get('itlSeconds'))} | "
            f"{_seconds(after.get('itlSeconds'))} | {t.get('verdict') or 'running'} |"
        )
    return lines


def markdown(result: DemoResult, plot_name: str | None) -> str:
    lines = [
        f"# latency-tuner demo: {result.scenario}",
        "",
        result.description.strip(),
        "",
        f"- Targets met: **{'yes' if result.targets_met else 'no'}** (phase {result.phase})",
        f"- Objectives: {json.dumps(result.objectives)}",
        f"- Observed at the end: TTFT {_seconds(result.observed.get('ttftSeconds'))}, "
        f"ITL {_seconds(result.observed.get('itlSeconds'))}",
        f"- Trials: {len(result.trials)}; "
        f"run time {format_duration(round(result.duration_seconds))}; "
        f"metrics from {result.metrics_source}",
        f"- Expectations held: {'yes' if result.expectations_held else 'no'}"
        + ("" if not result.problems else " (" + "; ".join(result.problems) + ")"),
        "",
        "## Trials",
        "",
        *trial_table(result.trials),
        "",
    ]
    for t in result.trials:
        if t.get("reason"):
            lines.append(f"- trial {t.get('id')}: {t['reason']}")
    lines += [
        "",
        "## Arguments",
        "",
        "Before:",
        "",
        "```",
        " ".join(result.initial_args),
        "```",
        "",
        "After:",
        "",
        "```",
        " ".join(result.final_args),
        "```",
        "",
    ]
    if result.diagnosis:
        lines += ["## Last diagnosis", "", f"Bottleneck: {result.diagnosis.get('bottleneck')}", ""]
        lines += [f"- {f}" for f in result.diagnosis.get("findings", [])]
        lines += [f"- advice: {a}" for a in result.diagnosis.get("advice", [])]
        lines.append("")
    if result.events:
        lines += ["## Events", "", "| type | reason | message |", "|---|---|---|"]
        lines += [f"| {e['type']} | {e['reason']} | {e['message']} |" for e in result.events]
        lines.append("")
    if plot_name:
        lines += ["## Latency per trial", "", f"![TTFT and ITL per trial]({plot_name})", ""]
    return "\n".join(lines)


def plot(result: DemoResult, path: Path) -> bool:
    """TTFT and ITL before the first trial and after each, against the targets. False when
    matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels, ttft, itl = ["start"], [], []
    first = (result.trials[0].get("before") if result.trials else None) or result.observed
    ttft.append(first.get("ttftSeconds"))
    itl.append(first.get("itlSeconds"))
    for t in result.trials:
        after = t.get("after") or {}
        labels.append(f"{t.get('id')}: {t.get('knob')}={t.get('to')}\n{t.get('verdict')}")
        ttft.append(after.get("ttftSeconds"))
        itl.append(after.get("itlSeconds"))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, values, name in ((axes[0], ttft, "ttft"), (axes[1], itl, "itl")):
        points = [(i, float(v) * 1000) for i, v in enumerate(values) if v is not None]
        ax.plot(
            [x for x, _ in points],
            [y for _, y in points],
            marker="o",
            label=f"{name.upper()} observed",
        )
        objective = result.objectives.get(name)
        if objective:
            ax.axhline(
                objective["thresholdSeconds"] * 1000,
                color="red",
                linestyle="--",
                label=f"target p{objective['percentile']}",
            )
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_ylabel("ms")
        ax.set_title(f"{name.upper()} per trial")
        ax.legend(fontsize=8)
    fig.suptitle(f"latency-tuner demo: {result.scenario}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write(result: DemoResult, folder: Path) -> Path:
    """Write report.md, trials.png and result.json into ``folder``; returns the Markdown path."""
    folder.mkdir(parents=True, exist_ok=True)
    has_plot = plot(result, folder / "trials.png")
    page = folder / "report.md"
    page.write_text(markdown(result, "trials.png" if has_plot else None))
    (folder / "result.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return page
