"""The report as files: ``report.md`` (summary, tuning cost, trials, arguments before and after,
last diagnosis, events), ``trials.png`` (TTFT and ITL per trial against the targets) and
``result.json``. Durations in the one style users read everywhere (``format_duration``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from latency_tuner.api.durations import format_duration
from latency_tuner.api.status import Prediction
from latency_tuner.report.cost import TuningCost
from latency_tuner.report.model import TuningReport

PLOT_NAME = "trials.png"


def _seconds(value: Any) -> str:
    return "-" if value is None else format_duration(float(value))


def _cell(text: Any) -> str:
    # A Markdown table cell: pipes escaped, one line.
    return str(text).replace("|", "\\|").replace("\n", " ")


def trial_table(trials: Sequence[Mapping[str, Any]], latencies: Sequence[str]) -> list[str]:
    """The trials as a Markdown table, with before/after columns for ``latencies``."""
    columns = [f"{name.upper()} {side}" for name in latencies for side in ("before", "after")]
    lines = [
        "| # | knob | from | to | " + " | ".join(columns) + " | predicted effect | verdict |",
        "|---|---|---|---|" + "---|" * len(columns) + "---|---|",
    ]
    for t in trials:
        before, after = t.get("before") or {}, t.get("after") or {}
        cells = [
            _seconds(snapshot.get(f"{name}Seconds"))
            for name in latencies
            for snapshot in (before, after)
        ]
        lines.append(
            f"| {t.get('id')} | {t.get('knob')} | {t.get('from') or '(default)'} | "
            f"{t.get('to') or '(removed)'} | " + " | ".join(cells) + " | "
            f"{_predictions(t.get('predictions') or [])} | {t.get('verdict') or 'running'}"
            f"{' (for margin: targets met before)' if t.get('refinement') else ''} |"
        )
    return lines


def _predictions(predictions: Sequence[Mapping[str, Any]]) -> str:
    """Each objective's expected change and, once judged, the measured one; "-" for none (a
    trial from before predictions, or one that was read from a status it does not parse)."""
    try:
        return "; ".join(Prediction.model_validate(p).describe() for p in predictions) or "-"
    except ValidationError:
        return "-"


def _objectives(objectives: Mapping[str, Any]) -> str:
    parts = [
        f"{name.upper()} p{goal['percentile']} <= {format_duration(goal['thresholdSeconds'])}"
        for name, goal in objectives.items()
    ]
    return ", ".join(parts) or "none"


def _hours(hours: float) -> str:
    # 2.50, but 0.0075 rather than 0.01: a short demo's trials are worth their digits.
    return f"{hours:.2f}" if hours >= 1 else f"{hours:.2g}"


def cost_lines(cost: TuningCost) -> list[str]:
    covered = (
        ""
        if cost.listed_trials == cost.trial_count
        else f" (figures over the {cost.listed_trials} trials still listed in the status)"
    )
    if cost.gpu_hours is None:
        gpu = "unknown (the container sets no GPU limit)"
    else:
        gpu = (
            f"{_hours(cost.gpu_hours)} ({format_duration(round(cost.trial_seconds))} of trials x "
            f"{cost.gpus_per_pod} GPU(s) per pod x {cost.replicas} replica(s))"
        )
    return [
        f"- Trials: {cost.trial_count}{covered}",
        f"- Deployment rollouts caused: {cost.rollouts} (one per trial, one more per rollback)",
        f"- GPU-hours spent in trials: {gpu}",
    ]


def markdown(report: TuningReport, plot_name: str | None) -> str:
    lines = [f"# {report.title}", ""]
    if report.description:
        lines += [report.description.strip(), ""]
    lines += [
        f"- Targets met: **{'yes' if report.targets_met else 'no'}** (phase {report.phase})",
        f"- Objectives: {_objectives(report.objectives)}",
        "- Observed last: "
        + ", ".join(
            f"{name.upper()} {_seconds(report.observed.get(f'{name}Seconds'))}"
            for name in _panels(report)
        )
        + (f" over {report.observed['window']}" if report.observed.get("window") else ""),
    ]
    if report.duration_seconds is not None:
        lines.append(
            f"- Run time {format_duration(round(report.duration_seconds))}; "
            f"metrics from {report.metrics_source}"
        )
    if report.scenario:
        lines.append(
            f"- Expectations held: {'yes' if report.expectations_held else 'no'}"
            + ("" if not report.problems else " (" + "; ".join(report.problems) + ")")
        )
    lines += ["", "## What tuning cost", "", *cost_lines(report.cost), ""]
    lines += ["## Trials", "", *trial_table(report.trials, _panels(report)), ""]
    for t in report.trials:
        changes = "; ".join(t.get("changes") or [])
        if changes:
            lines.append(f"- trial {t.get('id')} changed: {changes}")
        if t.get("reason"):
            lines.append(f"- trial {t.get('id')}: {t['reason']}")
    lines += ["", "## Arguments", "", "Before:", "", "```", " ".join(report.initial_args), "```"]
    lines += ["", "After:", "", "```", " ".join(report.final_args), "```", ""]
    if report.diagnosis:
        lines += ["## Last diagnosis", "", f"Bottleneck: {report.diagnosis.get('bottleneck')}", ""]
        lines += [f"- {f}" for f in report.diagnosis.get("findings", [])]
        lines += [f"- advice: {a}" for a in report.diagnosis.get("advice", [])]
        lines.append("")
    if report.events:
        lines += ["## Events", "", "| time | type | reason | message |", "|---|---|---|---|"]
        lines += [
            f"| {e.get('time', '')} | {e['type']} | {e['reason']} | {_cell(e['message'])} |"
            for e in report.events
        ]
        lines.append("")
    if plot_name:
        lines += ["## Latency per trial", "", f"![TTFT and ITL per trial]({plot_name})", ""]
    return "\n".join(lines)


TRIAL_KEYS = ("id", "knob", "from", "to", "changes", "startedAt", "finishedAt", "before", "after",
              "predictions", "verdict", "reason", "refinement")  # fmt: skip


def to_json(report: TuningReport) -> dict[str, Any]:
    cost = report.cost
    out: dict[str, Any] = {
        "name": report.name,
        "namespace": report.namespace,
        "targetsMet": report.targets_met,
        "phase": report.phase,
        "objectives": report.objectives,
        "observed": report.observed,
        "trials": [{key: t.get(key) for key in TRIAL_KEYS} for t in report.trials],
        "initialArgs": report.initial_args,
        "finalArgs": report.final_args,
        "cost": {
            "trialCount": cost.trial_count,
            "listedTrials": cost.listed_trials,
            "rollouts": cost.rollouts,
            "trialSeconds": round(cost.trial_seconds, 1),
            "gpusPerPod": cost.gpus_per_pod,
            "replicas": cost.replicas,
            "gpuHours": None if cost.gpu_hours is None else round(cost.gpu_hours, 4),
        },
        "diagnosis": report.diagnosis,
        "events": report.events,
        "conditions": report.conditions,
    }
    if report.scenario:
        out.update(
            scenario=report.scenario,
            durationSeconds=round(report.duration_seconds or 0.0, 1),
            expectationsHeld=report.expectations_held,
            problems=report.problems,
            metricsSource=report.metrics_source,
        )
    return out


VERDICT_COLORS = {"Keep": "tab:green", None: "tab:blue"}  # rolled back: grey
LATENCIES = ("ttft", "itl", "e2e")


def _panels(report: TuningReport) -> list[str]:
    # One panel per latency with a target or a measurement; TTFT and ITL when nothing is known.
    snapshots = [report.observed] + [
        t.get(side) or {} for t in report.trials for side in ("before", "after")
    ]
    seen = [
        name
        for name in LATENCIES
        if name in report.objectives or any(s.get(f"{name}Seconds") is not None for s in snapshots)
    ]
    return seen or ["ttft", "itl"]


def plot(report: TuningReport, path: Path) -> bool:
    """Each trial's window before (hollow) and after (filled: green kept, grey rolled back) its
    change, per latency, against the target; with no trial, the last observed window. False
    when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = _panels(report)
    trials = report.trials
    labels = [
        f"#{t.get('id')}\n{t.get('knob')}\n-> {t.get('to') or '(removed)'}\n"
        f"{t.get('verdict') or 'running'}"
        for t in trials
    ] or ["now"]
    width = max(4.5, 1.7 * len(labels)) + 1.6  # the legend sits right of the plot
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), 4.6), squeeze=False)
    for ax, name in zip(axes[0], panels, strict=True):
        key = f"{name}Seconds"
        if not trials and report.observed.get(key) is not None:
            ax.scatter([0], [report.observed[key] * 1000], color="tab:blue", label="observed")
        for i, t in enumerate(trials):
            before, after = (t.get("before") or {}).get(key), (t.get("after") or {}).get(key)
            color = VERDICT_COLORS.get(t.get("verdict"), "tab:gray")
            if before is not None and after is not None:
                ax.plot([i, i], [before * 1000, after * 1000], color=color, linewidth=1, zorder=1)
            if before is not None:
                ax.scatter([i], [before * 1000], facecolors="white", edgecolors="tab:blue",
                           zorder=2, label="before" if i == 0 else None)  # fmt: skip
            if after is not None:
                ax.scatter([i], [after * 1000], color=color, zorder=3)
        objective = report.objectives.get(name)
        if objective:
            ax.axhline(objective["thresholdSeconds"] * 1000, color="red", linestyle="--",
                       label=f"target p{objective['percentile']}")  # fmt: skip
        ax.scatter([], [], color="tab:green", label="after, kept")
        ax.scatter([], [], color="tab:gray", label="after, rolled back")
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_xlim(-0.5, len(labels) - 0.5)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("ms")
        ax.set_title(f"{name.upper()} before and after each trial")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(report.title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write(report: TuningReport, folder: Path) -> Path:
    """Write report.md, trials.png and result.json into ``folder``; returns the Markdown path."""
    folder.mkdir(parents=True, exist_ok=True)
    has_plot = plot(report, folder / PLOT_NAME)
    page = folder / "report.md"
    page.write_text(markdown(report, PLOT_NAME if has_plot else None))
    (folder / "result.json").write_text(json.dumps(to_json(report), indent=2) + "\n")
    return page
