"""The Rollout-against-Canary table, its per-run lines and its JSON.

Per strategy and world:

- success: share of the feasible runs (the oracle's steady state) that met the targets,
  confirmed by the longer window, within the budget;
- rollouts: median and p90 of the rollouts to success over the feasible runs (a run that did
  not succeed counts as ``max(rollouts, budget)``, as in the convergence report);
- harm: requests served by a configuration worse than the start, over every request of every
  run (feasible or not), with the number of runs that had any and the worst run's share;
- wrong keeps: kept changes not better than what they replaced, over all kept changes, and the
  runs with one;
- short: requests finished while fewer pods were ready than the Deployments want.

Percentiles as ``report.percentile``. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from latency_tuner.convergence.report import json_ready, percentile, rollouts_to_success
from latency_tuner.convergence.strategies import StrategyJobResult, StrategyOutcome


@dataclass(frozen=True)
class StrategyStats:
    strategy: str
    world: str
    runs: int
    feasible_runs: int
    successes: int
    median_rollouts: float | None
    p90_rollouts: float | None
    canaries: int
    requests: int
    harmful: int
    runs_with_harm: int
    worst_harm: float | None  # the highest share of one run's requests
    kept: int
    wrong_keeps: int
    runs_with_wrong_keep: int
    short: int

    @property
    def harm_share(self) -> float | None:
        return self.harmful / self.requests if self.requests else None

    @property
    def short_share(self) -> float | None:
        return self.short / self.requests if self.requests else None


def strategy_stats(
    results: Sequence[StrategyJobResult], strategy: str, world: str, budget: int
) -> StrategyStats:
    runs = [r for r in results if strategy in r.outcomes and world in ("all", r.world)]
    outs = [r.outcomes[strategy] for r in runs]
    feasible = [r.outcomes[strategy] for r in runs if r.feasible]
    spent = [rollouts_to_success(o.success, o.rollouts, budget) for o in feasible]
    shares = [o.harmful / o.requests for o in outs if o.requests]
    return StrategyStats(
        strategy=strategy,
        world=world,
        runs=len(runs),
        feasible_runs=len(feasible),
        successes=sum(1 for o in feasible if o.success),
        median_rollouts=percentile(spent, 50),
        p90_rollouts=percentile(spent, 90),
        canaries=sum(o.canaries for o in outs),
        requests=sum(o.requests for o in outs),
        harmful=sum(o.harmful for o in outs),
        runs_with_harm=sum(1 for o in outs if o.harmful),
        worst_harm=max(shares, default=None),
        kept=sum(o.kept for o in outs),
        wrong_keeps=sum(o.wrong_keeps for o in outs),
        runs_with_wrong_keep=sum(1 for o in outs if o.wrong_keeps),
        short=sum(o.short for o in outs),
    )


def all_stats(
    results: Sequence[StrategyJobResult], strategies: Sequence[str], budget: int
) -> list[StrategyStats]:
    worlds: list[str] = sorted({r.world for r in results})
    if len(worlds) > 1:
        worlds.append("all")
    return [strategy_stats(results, s, w, budget) for w in worlds for s in strategies]


def _share(n: int, of: int) -> str:
    return "-" if of == 0 else f"{n}/{of} ({n / of:.0%})"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def table(stats: Sequence[StrategyStats], budget: int) -> str:
    """A Markdown table, one row per world and strategy."""

    def capped(x: float | None) -> str:
        return "-" if x is None else (f">{budget}" if x > budget else f"{x:.1f}")

    head = (
        "| world | strategy | success (feasible) | median / p90 rollouts | canaries | harm: "
        "requests on a worse config | runs with harm | worst run | wrong keeps / kept | runs "
        "with a wrong keep | requests at reduced capacity |"
    )
    lines = [head, "|" + "---|" * 11]
    for s in stats:
        lines.append(
            f"| {s.world} | {s.strategy} | {_share(s.successes, s.feasible_runs)} | "
            f"{capped(s.median_rollouts)} / {capped(s.p90_rollouts)} | {s.canaries} | "
            f"{_pct(s.harm_share)} | {s.runs_with_harm}/{s.runs} | {_pct(s.worst_harm)} | "
            f"{s.wrong_keeps}/{s.kept} | {s.runs_with_wrong_keep}/{s.runs} | "
            f"{_pct(s.short_share)} |"
        )
    return "\n".join(lines)


def _cell(o: StrategyOutcome | None) -> str:
    if o is None:
        return "-"
    mark = "*" if o.success else ("x" if o.gave_up else " ")
    share = o.harmful / o.requests if o.requests else 0.0
    short = o.short / o.requests if o.requests else 0.0
    return f"{o.rollouts}{mark} harm {share:4.0%} wrong {o.wrong_keeps}/{o.kept} short {short:3.0%}"


def per_scenario(results: Sequence[StrategyJobResult], strategies: Sequence[str]) -> str:
    """One line per job: feasibility, then per strategy rollouts (* success, x gave up), harm
    share, wrong keeps / kept and the share of requests at reduced capacity."""
    width = max((len(r.scenario) for r in results), default=10)
    lines = [f"{'scenario'.ljust(width)}  world      seed  oracle      " +
             "  ".join(s.ljust(36) for s in strategies)]  # fmt: skip
    for r in results:
        oracle = "feasible" if r.feasible else "infeasible"
        cells = "  ".join(_cell(r.outcomes.get(s)).ljust(36) for s in strategies)
        lines.append(f"{r.scenario.ljust(width)}  {r.world:9}  {r.seed:4}  {oracle:10}  {cells}")
    return "\n".join(lines)


def to_json(
    results: Sequence[StrategyJobResult], stats: Sequence[StrategyStats], meta: dict[str, Any]
) -> str:
    body = {
        "meta": meta,
        "stats": [
            {**asdict(s), "harm_share": s.harm_share, "short_share": s.short_share} for s in stats
        ],
        "jobs": [asdict(r) for r in results],
    }
    return json.dumps(json_ready(body), indent=2)


def load_json(path: Path) -> tuple[list[StrategyJobResult], dict[str, Any]]:
    """A run written by ``to_json``: its results and its meta."""
    body = json.loads(path.read_text())
    results = []
    for job in body["jobs"]:
        outcomes = {
            name: StrategyOutcome(**{**o, "history": tuple(o.get("history", ()))})
            for name, o in job["outcomes"].items()
        }
        results.append(StrategyJobResult(**{**job, "outcomes": outcomes}))
    return results, body["meta"]
