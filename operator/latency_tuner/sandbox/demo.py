"""The demo's machinery: the whole loop on one machine, no cluster, no GPU.

Starts the sandbox (API emulator, simulated vLLM pods, Prometheus when installed, load), the
operator as its own process, applies the scenario's LatencyTarget, prints the progress as the
operator works (phase, trial, change, TTFT/ITL against the targets, verdicts), and ends with a
report (Markdown, a PNG plot, JSON). Exit code 0 when the scenario's expectations hold.

``run_demo`` is what ``latency-tuner demo`` (``latency_tuner.cli.demo``) runs; ``DemoRun`` is
the same machinery as a library, for the e2e tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from latency_tuner.api.durations import format_duration
from latency_tuner.report import TuningReport, build_report, objectives_of
from latency_tuner.sandbox.cluster import Sandbox
from latency_tuner.sandbox.operator_process import OperatorProcess
from latency_tuner.sandbox.podrunner import PodEngine
from latency_tuner.sandbox.scenario import Scenario

DEFAULT_SCENARIO = "queueing"
LT_API = "tuning.latencytuner.io/v1alpha1"
FINAL_PHASES = {"Converged", "Exhausted", "Failed"}


class DemoRun:
    """A scenario's sandbox with the operator running against it."""

    def __init__(self, sandbox: Sandbox, operator: OperatorProcess, scenario: Scenario) -> None:
        self.sandbox = sandbox
        self.operator = operator
        self.scenario = scenario

    @property
    def name(self) -> str:
        return str(self.scenario.latency_target_manifest()["metadata"]["name"])

    async def target(self) -> dict[str, Any]:
        obj = await self.sandbox.get(LT_API, "LatencyTarget", self.name, self.sandbox.namespace)
        return dict(obj or {})

    async def status(self) -> dict[str, Any]:
        return dict((await self.target()).get("status") or {})

    async def container_args(self) -> list[str]:
        dep = await self.sandbox.get(
            "apps/v1", "Deployment", self.scenario.deployment_name, self.sandbox.namespace
        )
        assert dep is not None
        container = dep["spec"]["template"]["spec"]["containers"][0]
        return [*(container.get("command") or []), *(container.get("args") or [])]

    async def report(self) -> TuningReport:
        """The report of the LatencyTarget as it stands: the same one `latency-tuner report`
        writes for a real cluster's LatencyTarget."""
        deployment = await self.sandbox.get(
            "apps/v1", "Deployment", self.scenario.deployment_name, self.sandbox.namespace
        )
        # Before the LatencyTarget is applied (an early Ctrl-C), the manifest it would have.
        target = await self.target() or self.scenario.latency_target_manifest()
        return build_report(
            target,
            events=await self.sandbox.list("v1", "Event", self.sandbox.namespace),
            deployment=deployment,
            now=datetime.now(UTC),
        )

    async def wait_for(
        self,
        check: Callable[[dict[str, Any]], bool],
        *,
        within: float,
        on_status: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Poll the status until ``check`` holds; the last status either way (None on timeout
        is never returned: the caller checks ``check`` on the result)."""
        deadline = time.monotonic() + within
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status = await self.status()
            if on_status is not None:
                on_status(status)
            if check(status) or not self.operator.running:  # a dead operator changes nothing
                return status
            await asyncio.sleep(1.0)
        return status

    async def explain(self, log_lines: int = 40) -> str:
        """Why a wait ended where it did, for a failing test's message: the operator's state,
        the target's conditions, its last events and the operator log's last lines of note
        (kopf's routine "succeeded" lines and probe requests left out)."""
        status = await self.status()
        prometheus = self.sandbox.prometheus
        scraping = "none" if prometheus is None else f"running: {prometheus.running}"
        lines = [
            f"operator running: {self.operator.running}; Prometheus {scraping}; "
            f"phase {status.get('phase')}"
        ]
        if prometheus is not None and prometheus.running:
            lines.append(f"  Prometheus {await asyncio.to_thread(prometheus.health)}")
            said = await asyncio.to_thread(_read_text, prometheus.log_path)
            lines.append(f"  Prometheus log ({prometheus.log_path}), last lines:")
            lines.extend(f"    {line[:300]}" for line in said.splitlines()[-8:])
        lines.append(f"  machine: {await asyncio.to_thread(_machine)}")
        for c in status.get("conditions") or []:
            said = f"{c.get('type')} {c.get('status')} {c.get('reason')}: {c.get('message')}"
            lines.append(f"  {said}")
        events = await self.sandbox.list("v1", "Event", self.sandbox.namespace)
        for e in events[-10:]:
            lines.append(f"  event {e.get('type')} {e.get('reason')}: {e.get('message')}")
        log = await asyncio.to_thread(_read_text, self.operator.log_path)
        noted = [
            line
            for line in log.splitlines()
            if line.strip() and "' succeeded." not in line and "aiohttp.access" not in line
        ]
        lines.append(f"operator log ({self.operator.log_path}), last lines of note:")
        lines.extend(f"  {line[:400]}" for line in noted[-log_lines:])
        return "\n".join(lines)


@contextlib.asynccontextmanager
async def demo_run(
    scenario: Scenario,
    *,
    workdir: Path,
    prometheus: bool | None = None,
    interval: str = "1s",
    engine: PodEngine | None = None,
) -> AsyncIterator[DemoRun]:
    """The sandbox and the operator process, with the LatencyTarget not yet applied; the pods
    run on ``engine`` (the simulator when None)."""
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    options = {} if engine is None else {"engine": engine}
    async with Sandbox(
        scenario, prometheus=prometheus, workdir=workdir / "sandbox", runner_options=options
    ) as sandbox:
        operator = OperatorProcess(
            kubeconfig=sandbox.kubeconfig_path,
            namespace=sandbox.namespace,
            log_path=workdir / "operator.log",
            prometheus_url=sandbox.prometheus_url,
            interval=interval,
        )
        await asyncio.to_thread(operator.start)
        try:
            yield DemoRun(sandbox, operator, scenario)
        finally:
            await asyncio.to_thread(operator.stop)


def _read_text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _machine() -> str:
    """The load average and the processes using the most CPU: whether the machine was busy
    when a wait ended (two cores shared by real vLLM, Prometheus and the operator)."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    try:
        ps = subprocess.run(
            ["ps", "-eo", "pcpu,stat,comm", "--sort=-pcpu"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.splitlines()[1:6]
    except (OSError, subprocess.SubprocessError) as exc:
        ps = [f"(ps failed: {exc})"]
    return f"load {load}; busiest: " + ", ".join(" ".join(line.split()) for line in ps)


class Progress:
    """Prints a line whenever the phase, the trial or the verdicts change."""

    def __init__(self, out: TextIO, objectives: dict[str, Any], started: float) -> None:
        self.out = out
        self.objectives = objectives
        self.started = started
        self.last = ""

    def __call__(self, status: dict[str, Any]) -> None:
        trial = status.get("currentTrial") or {}
        observed = status.get("observed") or {}
        parts = [status.get("phase", "Pending")]
        if trial:
            # Every argument the trial changes; older statuses only name the knob.
            change = "; ".join(trial.get("changes") or []) or (
                f"{trial.get('knob')} {trial.get('from') or '(default)'} -> "
                f"{trial.get('to') or '(removed)'}"
            )
            parts.append(f"trial {trial.get('id')}: {change}")
        for name in ("ttft", "itl"):
            goal = self.objectives.get(name)
            seen = observed.get(f"{name}Seconds")
            if goal and seen is not None:
                mark = "ok" if seen <= goal["thresholdSeconds"] else "over"
                parts.append(
                    f"{name.upper()} p{goal['percentile']} {format_duration(seen)} "
                    f"(target {format_duration(goal['thresholdSeconds'])}, {mark})"
                )
        done = status.get("trials") or []
        if done:
            parts.append(
                "verdicts: "
                + ", ".join(f"{t.get('knob')}={t.get('to')} {t.get('verdict')}" for t in done)
            )
        line = " | ".join(parts)
        if line != self.last:
            self.last = line
            clock = format_duration(round(time.monotonic() - self.started, 1))
            print(f"[{clock:>8}] {line}", file=self.out, flush=True)


def _met(status: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "TargetsMet" and c.get("status") == "True"
        for c in status.get("conditions", [])
    )


def _finished(status: dict[str, Any]) -> bool:
    return status.get("phase") in FINAL_PHASES and not status.get("currentTrial")


def kubectl_help(run: DemoRun) -> str:
    """How to look at the running sandbox with kubectl, as `demo --keep` prints it."""
    ns, name = run.sandbox.namespace, run.name
    return "\n".join(
        [
            "The sandbox stays up until Ctrl-C (or SIGTERM). In another terminal:",
            f"  export KUBECONFIG={run.sandbox.kubeconfig_path}",
            f"  kubectl get latencytargets -n {ns}",
            f"  kubectl describe lt {name} -n {ns}",
            f"  kubectl get deploy,pods -n {ns}",
            f"  kubectl get events -n {ns}",
            "  (the emulator serves no OpenAPI: add --validate=false to kubectl apply)",
        ]
    )


async def _until_interrupted() -> bool:
    """Wait for Ctrl-C / SIGTERM (a cancellation of this task); True once it came."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        _absorb_cancellation()
        return True
    return False  # pragma: no cover - the event is never set


def _absorb_cancellation() -> None:
    # The cancellation asked the demo to stop, not to skip its clean-up and report.
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def run_demo(
    scenario: Scenario,
    *,
    workdir: Path,
    within: float,
    out: TextIO,
    prometheus: bool | None = None,
    keep: bool = False,
    engine: PodEngine | None = None,
) -> TuningReport:
    """The whole demo. A cancellation of the task running it (Ctrl-C, SIGTERM: the CLI turns
    both into one) stops the waiting, shuts the operator, pods and Prometheus down, and still
    returns a report, marked interrupted, for a partial report."""
    started = time.monotonic()
    objectives = objectives_of(scenario.latency_target_model().spec)
    print(f"scenario {scenario.name}: {scenario.description.strip()}", file=out, flush=True)
    interrupted = False
    status: dict[str, Any] = {}
    report: TuningReport | None = None
    source = ""
    try:
        async with demo_run(scenario, workdir=workdir, prometheus=prometheus, engine=engine) as run:
            source = "Prometheus" if run.sandbox.prometheus_url else "direct scrape"
            print(
                f"sandbox ready: {len(run.sandbox.pods())} pod(s), metrics from {source}",
                file=out,
                flush=True,
            )
            try:
                await run.sandbox.apply_latency_target()
                status = await run.wait_for(
                    _finished, within=within, on_status=Progress(out, objectives, started)
                )
            except asyncio.CancelledError:
                _absorb_cancellation()
                interrupted = True
            report = await run.report()
            status = await run.status()
            if keep and not interrupted:
                print(kubectl_help(run), file=out, flush=True)
                await _until_interrupted()
    except asyncio.CancelledError:  # while the sandbox was still starting
        _absorb_cancellation()
        interrupted = True
    expect = scenario.expect
    problems = []
    met = _met(status)
    trials = list(status.get("trials") or [])
    if interrupted:
        problems.append(
            f"interrupted after {format_duration(round(time.monotonic() - started))} "
            f"(phase {status.get('phase') or 'not started'}): a partial report"
        )
    elif not _finished(status):
        problems.append(
            f"did not finish within {format_duration(within)} (phase {status.get('phase')})"
        )
    if expect is not None:
        if met != expect.feasible:
            problems.append(f"targetsMet is {met}, expected {expect.feasible} (expect.feasible)")
        if expect.max_trials is not None and len(trials) > expect.max_trials:
            problems.append(f"{len(trials)} trials, expected at most {expect.max_trials}")
    if report is None:  # stopped before the LatencyTarget existed
        report = build_report(scenario.latency_target_manifest(), now=datetime.now(UTC))
    return replace(
        report,
        scenario=scenario.name,
        description=scenario.description,
        duration_seconds=time.monotonic() - started,
        expectations_held=not problems,
        problems=problems,
        metrics_source=source,
    )
