"""`latency-tuner diagnose`: which stage of a live vLLM Deployment is slow, why, and the next
change to try, from its metrics, without touching the cluster.

The Deployment comes from a file (``--deployment-file``) or from the cluster (``--kubeconfig``,
read only); metrics from Prometheus (``--prometheus``) or, without one, from the pods'
``/metrics`` scraped directly (``--scrape URL ...``) over the window. Objectives come from a
LatencyTarget manifest or from ``--ttft p90=500ms`` style flags. The operator's own observe step
(``controller.gather``) reads the container, the GPUs and the window, so a container the
operator would not find is an error here too; the same diagnosis and planner as the operator's
produce the answer; the recommended change is printed as the exact JSON patch.

Exit codes: 0 done, 2 bad usage or input, 3 not a vLLM server, 4 no data, 5 metrics unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.adapters.metrics.scrape import ScrapeSource, ScrapeTarget
from latency_tuner.api.durations import format_duration, parse_duration
from latency_tuner.api.resource import InvalidLatencyTarget, LatencyTarget
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.gather import gather
from latency_tuner.controller.ports import Deployments, MetricsSource, Nodes, Ports
from latency_tuner.core.cluster import ContainerConfig, PodFacts, container_patch
from latency_tuner.core.diagnosis import Diagnosis
from latency_tuner.core.observation import NoData, Observation, ObservationResult
from latency_tuner.core.planner import Exhausted
from latency_tuner.core.promql import LabelMatcher
from latency_tuner.core.rollout import (
    Analysis,
    Blocked,
    Blocker,
    Facts,
    MetricsFailure,
    Ready,
    analyse,
    diagnosis_status,
    propose,
    target_container,
)

EXIT_USAGE, EXIT_NOT_VLLM, EXIT_NO_DATA, EXIT_UNREACHABLE = 2, 3, 4, 5


class UsageError(Exception):
    """Bad flags or input files; the message says which."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latency-tuner diagnose",
        description="Diagnose a vLLM Deployment from its metrics and recommend the next change.",
    )
    p.add_argument("--namespace", "-n", required=True, help="the Deployment's namespace")
    p.add_argument("--deployment", "-d", required=True, help="the Deployment's name")
    p.add_argument("--container", help="the vLLM container (default: the first)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--deployment-file", type=Path, help="read the Deployment from this YAML")
    where.add_argument("--kubeconfig", help="read the Deployment (and node GPU labels) from here")
    metrics = p.add_mutually_exclusive_group(required=True)
    metrics.add_argument("--prometheus", metavar="URL", help="Prometheus HTTP API base URL")
    metrics.add_argument(
        "--scrape",
        metavar="URL",
        nargs="+",
        help="scrape these pod /metrics URLs directly over the window instead of Prometheus",
    )
    p.add_argument("--bearer-token-file", help="bearer token for Prometheus")
    p.add_argument("--ca-file", help="CA bundle for Prometheus' TLS certificate")
    p.add_argument("--manifest", type=Path, help="a LatencyTarget YAML: objectives and knobs")
    p.add_argument("--ttft", help="TTFT objective, e.g. p90=500ms")
    p.add_argument("--itl", help="inter-token latency objective, e.g. p90=50ms")
    p.add_argument("--e2e", help="end-to-end latency objective, e.g. p95=20s")
    p.add_argument("--window", default="5m", help="measurement window (default 5m)")
    p.add_argument("--gpu", help="GPU product if node labels cannot tell, e.g. H100-SXM")
    p.add_argument("--interconnect", choices=("NVLink", "PCIe"), help="GPU interconnect")
    p.add_argument("--scrape-interval", default="2s", help="with --scrape: time between scrapes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _objective(text: str, flag: str) -> dict[str, Any]:
    try:
        left, threshold = text.split("=", 1)
        percentile = int(left.strip().lower().removeprefix("p"))
    except ValueError:
        raise UsageError(f"{flag} {text!r}: write it as p90=500ms") from None
    return {"percentile": percentile, "threshold": threshold.strip()}


def load_spec(args: argparse.Namespace) -> LatencyTargetSpec:
    """The LatencyTarget spec from --manifest, with --ttft/--itl/--e2e/--window on top."""
    if args.manifest is not None:
        try:
            manifest = yaml.safe_load(args.manifest.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"--manifest {args.manifest}: {exc}") from exc
    else:
        manifest = {
            "apiVersion": "tuning.latencytuner.io/v1alpha1",
            "kind": "LatencyTarget",
            "metadata": {"name": "diagnose", "namespace": args.namespace},
            "spec": {"targetRef": {"name": args.deployment}},
        }
    spec = manifest.setdefault("spec", {})
    objectives = spec.setdefault("objectives", {})
    for name in ("ttft", "itl", "e2e"):
        text = getattr(args, name)
        if text:
            objectives[name] = _objective(text, f"--{name}")
    spec.setdefault("evaluation", {})["window"] = args.window
    if args.container:
        spec.setdefault("targetRef", {})["container"] = args.container
    if args.gpu or args.interconnect:
        hardware = spec.setdefault("hardware", {})
        if args.gpu:
            hardware["gpuProduct"] = args.gpu
        if args.interconnect:
            hardware["interconnect"] = args.interconnect
    try:
        return LatencyTarget.from_manifest(manifest).spec
    except InvalidLatencyTarget as exc:
        hint = " (give --ttft, --itl or --e2e, or --manifest)" if not objectives else ""
        raise UsageError("; ".join(exc.problems) + hint) from exc


class FileDeployments:
    """``controller.ports.Deployments`` over a YAML file: the Deployment named ``--deployment``
    (else the file's first), no pods, never written."""

    def __init__(self, path: Path, namespace: str) -> None:
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"--deployment-file {path}: {exc}") from exc
        self.found = [d for d in docs if d.get("kind") == "Deployment"]
        if not self.found:
            raise UsageError(f"--deployment-file {path} holds no Deployment")
        self.namespace = namespace

    async def get(self, *, namespace: str, name: str) -> DeploymentView:
        named = [d for d in self.found if (d.get("metadata") or {}).get("name") == name]
        obj = dict((named or self.found)[0])
        obj["metadata"] = {"namespace": namespace, "name": name, **(obj.get("metadata") or {})}
        return DeploymentView(obj)

    async def pods(
        self, deployment: DeploymentView, *, container: str | None, gpu_resource: str
    ) -> tuple[PodFacts, ...]:
        return ()

    async def patch_container(
        self,
        deployment: DeploymentView,
        *,
        container: str | None,
        config: ContainerConfig,
        gpu_resource: str,
        annotations: Mapping[str, str] | None = None,
    ) -> DeploymentView:
        raise UsageError("diagnose never changes a Deployment")


class NoLatencyTargets:
    """``controller.ports.LatencyTargets`` of a tool that has no LatencyTarget object."""

    async def get(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def list(self, *, namespace: str) -> list[dict[str, Any]]:
        return []

    async def write_status(
        self, *, namespace: str, name: str, status: LatencyTargetStatus
    ) -> dict[str, Any]:
        raise UsageError("diagnose never writes a status")


class _Metrics:
    """The diagnosis' ``MetricsFor``: Prometheus, or the ``--scrape`` URLs sampled over a
    whole window when ``gather`` first asks (after the container checks, so a Deployment that
    cannot be diagnosed fails at once)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.scraped: ScrapeSource | None = None

    async def __call__(self, spec: LatencyTargetSpec, namespace: str, name: str) -> MetricsSource:
        args = self.args
        if args.prometheus:
            token = None
            if args.bearer_token_file:
                token = (await asyncio.to_thread(Path(args.bearer_token_file).read_text)).strip()
            return PrometheusSource(
                PrometheusSettings(url=args.prometheus, bearer_token=token, ca_file=args.ca_file)
            )
        # Direct scrape: sample every pod over the window, label it as Prometheus would.
        targets = [
            ScrapeTarget(url, {"namespace": args.namespace, "pod": f"{args.deployment}-pod-{i}"})
            for i, url in enumerate(args.scrape)
        ]
        self.scraped = scrape = ScrapeSource(lambda: targets)
        interval = parse_duration(args.scrape_interval)
        started = time.monotonic()
        while True:
            await scrape.scrape_once()
            if time.monotonic() - started >= spec.evaluation.window_seconds:
                break
            await asyncio.sleep(interval)
        return _JustSampled(scrape)


class _JustSampled:
    """The window just sampled: it ends now (not when ``gather`` began), and the series carry
    made-up pod names, so it is selected by namespace only."""

    def __init__(self, source: ScrapeSource) -> None:
        self.source = source

    async def observe(
        self,
        *,
        matchers: Sequence[LabelMatcher],
        window_seconds: float,
        percentiles: Iterable[int] = (),
        end: float | None = None,
    ) -> ObservationResult:
        return await self.source.observe(
            matchers=[m for m in matchers if m.label != "pod"],
            window_seconds=window_seconds,
            percentiles=percentiles,
        )


async def observe(args: argparse.Namespace, spec: LatencyTargetSpec) -> Facts:
    """The operator's own observe step (``controller.gather``) over the file or the cluster
    (read only) and the metrics source: the same container, hardware and window it would use."""
    if args.deployment_file is not None:
        deployments: Deployments = FileDeployments(args.deployment_file, args.namespace)
        nodes: Nodes | None = None
    else:
        from latency_tuner.adapters.kubernetes.client import make_api_client
        from latency_tuner.adapters.kubernetes.deployments import Deployments as KubeDeployments
        from latency_tuner.adapters.kubernetes.nodes import Nodes as KubeNodes

        client = await asyncio.to_thread(make_api_client, args.kubeconfig)
        deployments, nodes = KubeDeployments(client), KubeNodes(client)
    metrics = _Metrics(args)
    ports = Ports(
        deployments=deployments,
        latencytargets=NoLatencyTargets(),
        metrics_for=metrics,
        nodes=nodes,
    )
    try:
        status = LatencyTargetStatus()
        return await gather(
            ports, spec, status, args.namespace, "diagnose", ports.clock(), claims=()
        )
    finally:
        if metrics.scraped is not None:
            await metrics.scraped.aclose()


def recommend(analysis: Analysis, facts: Ready, spec: LatencyTargetSpec) -> dict[str, Any] | None:
    """The operator's next change for this window, as the JSON patch it would apply."""
    observation = analysis.window
    if not isinstance(observation, Observation) or not analysis.diagnosis.causes:
        return None
    cl = facts.command_line
    proposal = propose(spec, analysis.diagnosis, observation, cl, facts.hardware)
    if isinstance(proposal, Exhausted):
        return {"exhausted": proposal.reason, "advice": list(proposal.advice)}
    target = target_container(proposal, cl, facts.container)
    return {
        "knob": proposal.knob.value,
        "from": proposal.from_value,
        "to": proposal.to_value,
        "class": proposal.knob_class.value,
        "reason": proposal.reason,
        "patch": container_patch(
            facts.deployment, facts.container_index, target, facts.gpu_resource
        ),
    }


def _observation_json(obs: ObservationResult) -> dict[str, Any]:
    return obs.model_dump(mode="json")


def _quantiles(values: dict[int, float]) -> str:
    return ", ".join(f"p{p} {format_duration(v)}" for p, v in sorted(values.items())) or "none"


def render_text(
    obs: ObservationResult, diagnosis: Diagnosis, recommendation: dict[str, Any] | None
) -> str:
    lines = []
    if isinstance(obs, NoData):
        lines.append(f"Observation: no data ({obs.reason})")
    else:
        lines += [
            f"Observation over {format_duration(obs.window_seconds)} ({obs.requests} requests, "
            f"{obs.request_rate:.2f}/s, {obs.pods} pod(s))",
            f"  TTFT: {_quantiles(obs.ttft)}",
            f"  ITL:  {_quantiles(obs.itl)}",
        ]
    status = diagnosis_status(diagnosis)
    lines += ["", f"Bottleneck: {status.bottleneck}"]
    lines += [f"  - {f}" for f in status.findings]
    if status.evidence:
        lines.append("Evidence:")
        lines += [f"  - {e.text}" for e in status.evidence]
    if status.knobs:
        lines.append(f"Knobs worth trying, in order: {', '.join(status.knobs)}")
    if status.advice:
        lines.append("Advice (outside the operator's reach):")
        lines += [f"  - {a}" for a in status.advice]
    lines.append("")
    if recommendation is None:
        lines.append("Recommendation: none (targets met or nothing measurable)")
    elif "exhausted" in recommendation:
        lines.append(f"Recommendation: nothing safe left to try: {recommendation['exhausted']}")
    else:
        lines.append(
            f"Recommendation: {recommendation['knob']} {recommendation['from']} -> "
            f"{recommendation['to']} ({recommendation['reason']})"
        )
        lines.append("Patch (kubectl patch deployment ... --type=json -p '<below>'):")
        lines.append(json.dumps(recommendation["patch"]))
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        spec = load_spec(args)
        facts = asyncio.run(observe(args, spec))
    except UsageError as exc:
        print(f"latency-tuner diagnose: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(facts, Blocked) or isinstance(facts.windows.current, MetricsFailure):
        code, message = _problem(args, facts)
        print(f"latency-tuner diagnose: {message}", file=sys.stderr)
        return code
    analysis = analyse(spec, facts.windows.current, facts.command_line, facts.hardware)
    obs, diagnosis = analysis.window, analysis.diagnosis
    recommendation = recommend(analysis, facts, spec)
    if args.json:
        status = diagnosis_status(diagnosis)
        print(
            json.dumps(
                {
                    "observation": _observation_json(obs),
                    "diagnosis": status.model_dump(mode="json", by_alias=True),
                    "recommendation": recommendation,
                },
                indent=2,
            )
        )
    else:
        print(render_text(obs, diagnosis, recommendation))
    if isinstance(obs, NoData):
        print(f"latency-tuner diagnose: no data: {obs.reason}", file=sys.stderr)
        return EXIT_NO_DATA
    return 0


def _problem(args: argparse.Namespace, facts: Facts) -> tuple[int, str]:
    """The exit code and message when there is nothing to diagnose, as the operator would
    fail the same target (no Deployment, no such container, not vLLM, metrics unreachable)."""
    if isinstance(facts, Ready):
        current = facts.windows.current
        return EXIT_UNREACHABLE, current.message if isinstance(current, MetricsFailure) else "?"
    match facts.blocker:
        case Blocker.DEPLOYMENT_NOT_FOUND:
            return EXIT_USAGE, f"Deployment {args.namespace}/{args.deployment} not found"
        case Blocker.NOT_VLLM:
            return EXIT_NOT_VLLM, facts.detail
        case _:
            return EXIT_USAGE, facts.detail or facts.blocker.value
