"""Statistics of a suite's results, the table the CLI prints, its JSON and the plot.

Per method and world, over the runs whose scenario the oracle found feasible in that world
(steady state):

- success: share of runs that met the targets (confirmed by the longer window) in budget;
- rollouts to success ``R``: the Deployment changes spent until then (rollbacks and reverts
  included, for every method); a run that did not succeed counts as ``max(rollouts, budget)``
  (it would have needed more): median and p90;
- vs operator: ``sum R(method) / sum R(operator)`` over the same runs (> 1: more rollouts);
- gap: the final configuration's steady-state objective relative to the oracle's reference
  (the best configuration of the cheapest knob class that meets; median over successes);
- "within 10%": share of feasible runs that succeeded on a configuration that meets in steady
  state, of a class no costlier than the reference's, at no more GPUs, within 10% of it;
- "preferred class": share of the successes whose final configuration is of a class no costlier
  than the reference's (safe before lossy before costly);

and over the infeasible runs: "false success", the share that claimed the targets met, and
"gave up", the share that ended by deciding nothing is left (operator and blind: Exhausted;
grid, random, TPE: the space searched through) -- counted only over the runs whose whole space
fits in the budget, where every method could give up (elsewhere a search cannot, by
construction). Percentiles interpolate linearly (numpy's default).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from latency_tuner.convergence.suite import JobResult, MethodOutcome
from latency_tuner.core.knobs import KnobClass

QUALITY_GAP = 0.10


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class MethodStats:
    method: str
    world: str
    feasible_runs: int
    successes: int
    median_rollouts: float | None
    p90_rollouts: float | None
    total_rollouts: int
    ratio_to_operator: float | None
    median_gap: float | None
    within_gap: int  # successes within QUALITY_GAP of the reference, its class and GPUs at most
    at_min_gpus: int
    infeasible_runs: int
    gave_up: int
    false_success: int
    median_seconds: float | None  # virtual time to success
    success_median: float | None = None  # rollouts of the successful runs only
    success_p90: float | None = None
    infeasible_mean_rollouts: float | None = None  # what an impossible target costs
    give_up_runs: int = 0  # infeasible runs whose space fits in the budget
    preferred_class: int = 0  # successes no costlier than the reference's class

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.feasible_runs if self.feasible_runs else None


def rollouts_to_success(success: bool, rollouts: int, budget: int) -> int:
    return rollouts if success else max(rollouts, budget)


def method_stats(results: Sequence[JobResult], method: str, world: str, budget: int) -> MethodStats:
    runs = [r for r in results if method in r.outcomes and world in ("all", r.world)]
    feasible = [r for r in runs if r.feasible]
    infeasible = [r for r in runs if not r.feasible]
    spent = [rollouts_to_success(r.outcomes[method].success, r.outcomes[method].rollouts, budget)
             for r in feasible]  # fmt: skip
    ok = [r for r in feasible if r.outcomes[method].success]
    gaps = [g for r in ok if (g := r.gap(method)) is not None]
    preferred = [r for r in ok if allowed_class(r, r.outcomes[method])]
    at_min = [
        r for r in ok if r.min_gpus is not None and r.outcomes[method].final_gpus <= r.min_gpus
    ]
    within = [
        r
        for r in at_min
        if r.outcomes[method].final_meets
        and allowed_class(r, r.outcomes[method])
        and (g := r.gap(method)) is not None
        and g <= QUALITY_GAP
    ]
    comparable = [r for r in infeasible if r.give_up_compares]
    operator_spent = [
        rollouts_to_success(r.outcomes["operator"].success, r.outcomes["operator"].rollouts, budget)
        for r in feasible
        if "operator" in r.outcomes
    ]
    ratio = None
    if len(operator_spent) == len(spent) and sum(operator_spent) > 0:
        ratio = sum(spent) / sum(operator_spent)
    return MethodStats(
        method=method,
        world=world,
        feasible_runs=len(feasible),
        successes=len(ok),
        median_rollouts=percentile(spent, 50),
        p90_rollouts=percentile(spent, 90),
        total_rollouts=sum(spent),
        ratio_to_operator=ratio,
        median_gap=percentile(gaps, 50),
        within_gap=len(within),
        at_min_gpus=len(at_min),
        infeasible_runs=len(infeasible),
        gave_up=sum(1 for r in comparable if r.outcomes[method].gave_up),
        give_up_runs=len(comparable),
        preferred_class=len(preferred),
        false_success=sum(1 for r in infeasible if r.outcomes[method].success),
        median_seconds=percentile([r.outcomes[method].seconds for r in ok], 50),
        success_median=percentile([r.outcomes[method].rollouts for r in ok], 50),
        success_p90=percentile([r.outcomes[method].rollouts for r in ok], 90),
        infeasible_mean_rollouts=(
            sum(r.outcomes[method].rollouts for r in infeasible) / len(infeasible)
            if infeasible
            else None
        ),
    )


def allowed_class(result: JobResult, outcome: MethodOutcome) -> bool:
    """The final configuration's class is no costlier than the oracle's reference's."""
    if result.reference_class is None or outcome.final_class is None:
        return True
    return KnobClass(outcome.final_class).rank <= KnobClass(result.reference_class).rank


def all_stats(
    results: Sequence[JobResult], methods: Sequence[str], budget: int
) -> list[MethodStats]:
    worlds = sorted({r.world for r in results})
    return [method_stats(results, m, w, budget) for w in worlds for m in methods]


def _share(n: int, of: int) -> str:
    return "-" if of == 0 else f"{n}/{of} ({n / of:.0%})"


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def table(stats: Sequence[MethodStats], budget: int) -> str:
    """A Markdown table, one row per world and method."""
    head = (
        "| world | method | success (feasible) | median / p90 rollouts | successes: median / p90 "
        "| rollouts vs operator | median gap to reference | within 10% of reference | preferred "
        "class (successes) | false success (infeasible) | gave up (infeasible, space <= budget) "
        "| mean rollouts (infeasible) |"
    )
    lines = [head, "|" + "---|" * 12]
    for s in stats:

        def capped(x: float | None) -> str:
            return "-" if x is None else (f">{budget}" if x > budget else f"{x:.1f}")

        lines.append(
            f"| {s.world} | {s.method} | {_share(s.successes, s.feasible_runs)} | "
            f"{capped(s.median_rollouts)} / {capped(s.p90_rollouts)} | "
            f"{_num(s.success_median)} / {_num(s.success_p90)} | "
            f"{_num(s.ratio_to_operator, '{:.2f}x')} | {_num(s.median_gap, '{:+.0%}')} | "
            f"{_share(s.within_gap, s.feasible_runs)} | "
            f"{_share(s.preferred_class, s.successes)} | "
            f"{_share(s.false_success, s.infeasible_runs)} | "
            f"{_share(s.gave_up, s.give_up_runs)} | "
            f"{_num(s.infeasible_mean_rollouts)} |"
        )
    return "\n".join(lines)


def predictions(results: Sequence[JobResult], methods: Sequence[str]) -> str:
    """Per world, method whose trials record predictions (the operator's) and basis (the
    calibrated model's or the prior's, aimed-at latency or one moved along the way), how the
    expected relative change compared with the measured one; "" if none. Right direction: the
    measured change has the expected sign (lower when a gain was expected)."""
    lines = []
    for world in sorted({r.world for r in results}):
        for method in methods:
            found = [_forecasted(p) for r in results if r.world == world
                     and method in r.outcomes for p in r.outcomes[method].predictions]  # fmt: skip
            for basis in sorted({b for *_, b in found}):
                rows = [(e, m) for e, m, b in found if b == basis]
                expected = [e for e, _ in rows]
                measured = [m for _, m in rows]
                errors = [abs(m - e) for e, m in rows]
                right = sum(1 for e, m in rows if (m < 0) == (e < 0))
                lines.append(
                    f"| {world} | {method} | {basis} | {len(rows)} | "
                    f"{_num(percentile(expected, 50), '{:+.0%}')} | "
                    f"{_num(percentile(measured, 50), '{:+.0%}')} | "
                    f"{_num(percentile(errors, 50), '{:.0%}')} | {_share(right, len(rows))} |"
                )
    if not lines:
        return ""
    head = (
        "| world | method | basis | trial predictions | median expected change | median measured "
        "change | median error (points) | right direction |"
    )
    return "\n".join([head, "|" + "---|" * 8, *lines])


def _forecasted(p: Sequence[Any]) -> tuple[float, float, str]:
    """(expected, measured, basis label) of a recorded prediction; three-field ones (written
    before the basis was) are the prior's, aimed at."""
    basis = str(p[3]) if len(p) > 3 else "prior"
    aimed = bool(p[4]) if len(p) > 4 else True
    return float(p[1]), float(p[2]), basis if aimed else f"{basis}, along the way"


def text(
    results: Sequence[JobResult], methods: Sequence[str], budget: int, *, details: bool
) -> str:
    """What the CLI prints: the table, the predictions, and with ``details`` one line per run."""
    parts = [table(all_stats(results, methods, budget), budget)]
    for part in (predictions(results, methods), per_scenario(results, methods) if details else ""):
        if part:
            parts.append(part)
    return "\n\n".join(parts)


def per_scenario(results: Sequence[JobResult], methods: Sequence[str]) -> str:
    """One line per job: feasibility and each method's rollouts (* = success)."""
    width = max((len(r.scenario) for r in results), default=10)
    lines = [f"{'scenario'.ljust(width)}  world      seed  oracle (meeting/space class)  " +
             "  ".join(m.rjust(8) for m in methods)]  # fmt: skip
    for r in results:
        oracle = f"{'feasible' if r.feasible else 'infeasible'} {r.meeting}/{r.space}"
        oracle += f" {r.reference_class}" if r.reference_class else ""
        cells = []
        for m in methods:
            o = r.outcomes.get(m)
            if o is None:
                cells.append("-".rjust(8))
                continue
            mark = "*" if o.success else ("x" if o.gave_up else " ")
            worse = "^" if o.success and not allowed_class(r, o) else ""
            cells.append(f"{o.rollouts}{mark}{worse}".rjust(8))
        mismatch = "" if (r.expect == "feasible") == r.feasible else "  (expected " + r.expect + ")"
        lines.append(f"{r.scenario.ljust(width)}  {r.world:9}  {r.seed:4}  {oracle:28}  "
                     + "  ".join(cells) + mismatch)  # fmt: skip
    lines.append(
        "rollouts per method: * met and confirmed, x gave up, blank: budget or time "
        "spent; ^ ended on a costlier knob class than the oracle's reference"
    )
    return "\n".join(lines)


def json_ready(value: Any) -> Any:
    """``value`` with infinities and NaNs as null (JSON has neither), lists for tuples."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


def to_json(
    results: Sequence[JobResult], stats: Sequence[MethodStats], meta: dict[str, Any]
) -> str:
    body = {
        "meta": meta,
        "stats": [{**asdict(s), "success_rate": s.success_rate} for s in stats],
        "jobs": [asdict(r) for r in results],
    }
    return json.dumps(json_ready(body), indent=2)


def load_json(path: Path) -> tuple[list[JobResult], dict[str, Any]]:
    """A run written by ``to_json``: its results and its meta (to re-render the report)."""
    body = json.loads(path.read_text())
    results = []
    for job in body["jobs"]:
        outcomes = {
            name: MethodOutcome(**{**o, "history": tuple(o.get("history", ())),
                                   "final_objective": _inf(o["final_objective"]),
                                   "predictions": tuple(tuple(p)
                                                        for p in o.get("predictions", ()))})
            for name, o in job["outcomes"].items()
        }  # fmt: skip
        by_class = {k: tuple(v) for k, v in job.get("by_class", {}).items()}
        fields = {**job, "outcomes": outcomes, "best_objective": _inf(job["best_objective"]),
                  "by_class": by_class}  # fmt: skip
        results.append(JobResult(**fields))
    return results, body["meta"]


def merge(results: Sequence[JobResult]) -> list[JobResult]:
    """One result per (scenario, world, seed): methods run in separate arms (the searches in
    one run, the operator in another) share a job when their oracles agree (the same space,
    feasibility and reference objective), so every method is compared on the same runs. Jobs
    whose oracles differ (the simulator changed between the arms) stay apart."""
    merged: dict[tuple[object, ...], JobResult] = {}
    apart: list[JobResult] = []  # a method run twice on the same job: both runs stay
    for r in results:
        key = (r.scenario, r.world, r.seed, r.space, r.feasible, r.best_objective)
        known = merged.get(key)
        if known is None:
            merged[key] = r
        elif set(known.outcomes) & set(r.outcomes):
            apart.append(r)
        else:
            merged[key] = replace(known, outcomes={**known.outcomes, **r.outcomes})
    return [*merged.values(), *apart]


def _inf(value: float | None) -> float:
    return math.inf if value is None else float(value)


def plot(results: Sequence[JobResult], methods: Sequence[str], budget: int, path: Path) -> None:
    """Rollouts per scenario per method, one panel per world (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    worlds = sorted({r.world for r in results})
    scenarios = sorted({r.scenario for r in results})
    size = (max(12.0, len(scenarios) * 0.6), 4.5 * len(worlds))
    fig, axes = plt.subplots(len(worlds), 1, figsize=size, squeeze=False)
    width = 0.8 / max(1, len(methods))
    for ax, world in zip(axes[:, 0], worlds, strict=True):
        for i, method in enumerate(methods):
            xs, heights, hatches, colors = [], [], [], []
            for j, name in enumerate(scenarios):
                runs = [r for r in results if r.world == world and r.scenario == name
                        and method in r.outcomes]  # fmt: skip
                if not runs:
                    continue
                mean = sum(r.outcomes[method].rollouts for r in runs) / len(runs)
                ok = all(r.outcomes[method].success for r in runs)
                xs.append(j + (i - (len(methods) - 1) / 2) * width)
                heights.append(max(mean, 0.15))
                hatches.append("" if ok else "//")
                colors.append(f"C{i}")
            bars = ax.bar(xs, heights, width=width, label=method, color=colors)
            for bar, hatch in zip(bars, hatches, strict=True):
                bar.set_hatch(hatch)
        ax.axhline(budget, color="grey", linestyle=":", linewidth=1)
        infeasible = {r.scenario for r in results if r.world == world and not r.feasible}
        ax.set_xticks(range(len(scenarios)))
        ax.set_xticklabels([n + (" (inf.)" if n in infeasible else "") for n in scenarios],
                           rotation=60, ha="right", fontsize=7)  # fmt: skip
        ax.set_ylabel("rollouts")
        ax.set_title(f"{world} world: rollouts per scenario (hatched: not met within budget)")
        ax.legend(fontsize=8, ncol=len(methods))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
