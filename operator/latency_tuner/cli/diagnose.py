"""`latency-tuner diagnose`: which stage of a live vLLM Deployment is slow, why, and the next
change to try, from its metrics, without touching the cluster.

The Deployment comes from a file (``--deployment-file``) or from the cluster (``--kubeconfig``,
read only); metrics from Prometheus (``--prometheus-url``, or ``LT_PROMETHEUS_URL`` as for
``latency-tuner run``, whose flag names these are) or, without one, from the pods' ``/metrics``
scraped directly (``--scrape URL ...``) over the window, with a progress line now and then.
Objectives come from a LatencyTarget manifest (which also names the namespace and the
Deployment) or from ``--ttft p90=500ms`` style flags. The operator's own observe step
(``controller.gather``) reads the container, the GPUs and the window, so a container the
operator would not find is an error here too; the same diagnosis and planner as the operator's
produce the answer; the recommended change is printed as the exact JSON patch.

Exit codes: 0 done, 2 bad usage or input, 3 not a vLLM server, 4 no data, 5 metrics unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import urllib3
import yaml

from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.adapters.metrics.scrape import ScrapeSource, ScrapeTarget
from latency_tuner.api.durations import format_duration, parse_duration
from latency_tuner.api.resource import InvalidLatencyTarget, LatencyTarget
from latency_tuner.api.spec import LatencyTargetSpec, Mode
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.cli._kube import NoCluster, cluster_client
from latency_tuner.controller.deployment import DeploymentView
from latency_tuner.controller.errors import ClusterError
from latency_tuner.controller.gather import gather, selector
from latency_tuner.controller.ports import Deployments, MetricsSource, Nodes, Ports
from latency_tuner.core import promql
from latency_tuner.core.cluster import ContainerConfig, PodFacts, container_patch
from latency_tuner.core.diagnosis import Diagnosis
from latency_tuner.core.knobs.base import Change
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
    propose_margin,
    target_container,
)
from latency_tuner.settings import ENV_PREFIX

EXIT_USAGE, EXIT_NOT_VLLM, EXIT_NO_DATA, EXIT_UNREACHABLE = 2, 3, 4, 5


class UsageError(Exception):
    """Bad flags or input files; the message says which."""


# Flags shared with `latency-tuner run`: (flag, its old diagnose name kept as a hidden alias,
# help). Each also reads run's environment variable (LT_ + the flag in upper snake case).
_SHARED_FLAGS = (
    ("prometheus-url", "prometheus", "Prometheus HTTP API base URL"),
    ("prometheus-bearer-token-file", "bearer-token-file", "file holding the Prometheus token"),
    ("prometheus-ca-file", "ca-file", "CA bundle to verify Prometheus' TLS certificate"),
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latency-tuner diagnose",
        description="Diagnose a vLLM Deployment from its metrics and recommend the next change. "
        "Flags shared with `latency-tuner run` have its names and read its environment "
        "variables (in brackets).",
    )
    p.add_argument("--namespace", "-n", help="the Deployment's namespace (default: the manifest's)")
    p.add_argument(
        "--deployment", "-d", help="the Deployment's name (default: the manifest's targetRef)"
    )
    p.add_argument("--container", help="the vLLM container (default: the first)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--deployment-file", type=Path, help="read the Deployment from this YAML")
    where.add_argument(
        "--kubeconfig",
        help="read the Deployment (and node GPU labels) from the cluster of this kubeconfig "
        "[LT_KUBECONFIG] (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)",
    )
    for flag, old, text in _SHARED_FLAGS:
        dest = flag.replace("-", "_")
        p.add_argument(f"--{flag}", dest=dest, metavar="URL" if flag.endswith("url") else "FILE",
                       help=f"{text} [{env_name(flag)}]")  # fmt: skip
        p.add_argument(f"--{old}", dest=dest, help=argparse.SUPPRESS)
    p.add_argument(
        "--scrape",
        metavar="URL",
        nargs="+",
        help="scrape these pod /metrics URLs directly over the window instead of Prometheus",
    )
    p.add_argument(
        "--manifest",
        type=Path,
        help="a LatencyTarget YAML: objectives, knobs, and the namespace and Deployment",
    )
    p.add_argument("--ttft", help="TTFT objective, e.g. p90=500ms")
    p.add_argument("--itl", help="inter-token latency objective, e.g. p90=50ms")
    p.add_argument("--e2e", help="end-to-end latency objective, e.g. p95=20s")
    p.add_argument("--window", default="5m", help="measurement window (default 5m)")
    p.add_argument("--gpu", help="GPU product if node labels cannot tell, e.g. H100-SXM")
    p.add_argument("--interconnect", choices=("NVLink", "PCIe"), help="GPU interconnect")
    p.add_argument("--scrape-interval", default="2s", help="with --scrape: time between scrapes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def env_name(flag: str) -> str:
    """``latency-tuner run``'s environment variable for a flag (settings.ENV_PREFIX)."""
    return ENV_PREFIX + flag.upper().replace("-", "_")


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> argparse.Namespace:
    """Fill what flags left open: the shared flags from the environment, the namespace and
    the Deployment from the manifest; refuse what cannot work together."""
    for flag, _, _ in _SHARED_FLAGS:
        dest = flag.replace("-", "_")
        # --scrape wins over an inherited LT_PROMETHEUS_URL: the flag is the newer word.
        scraping = flag == "prometheus-url" and args.scrape
        if getattr(args, dest) is None and environ.get(env_name(flag)) and not scraping:
            setattr(args, dest, environ[env_name(flag)])
    if args.kubeconfig is None and args.deployment_file is None:
        args.kubeconfig = environ.get(env_name("kubeconfig")) or None
    if args.prometheus_url and args.scrape:
        raise UsageError("give --prometheus-url or --scrape, not both")
    if not args.prometheus_url and not args.scrape:
        raise UsageError(
            f"no metrics source: give --prometheus-url URL (or set {env_name('prometheus-url')})"
            ", or --scrape URL ... to read the pods' /metrics directly"
        )
    args.manifest_doc = _read_manifest(args.manifest) if args.manifest is not None else None
    if args.manifest_doc is not None:
        metadata = args.manifest_doc.get("metadata") or {}
        target = (args.manifest_doc.get("spec") or {}).get("targetRef") or {}
        args.namespace = args.namespace or metadata.get("namespace") or "default"
        args.deployment = args.deployment or target.get("name")
    named = (("-n", args.namespace), ("-d", args.deployment))
    missing = [flag for flag, value in named if not value]
    if missing:
        raise UsageError(
            f"give {' and '.join(missing)} (the Deployment's namespace and name), or --manifest "
            "with a LatencyTarget naming them"
        )
    return args


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"--manifest {path}: {exc}") from exc
    if not isinstance(manifest, dict):
        raise UsageError(f"--manifest {path}: not a LatencyTarget object")
    return manifest


def _objective(text: str, flag: str) -> dict[str, Any]:
    try:
        left, threshold = text.split("=", 1)
        percentile = int(left.strip().lower().removeprefix("p"))
    except ValueError:
        raise UsageError(f"{flag} {text!r}: write it as p90=500ms") from None
    return {"percentile": percentile, "threshold": threshold.strip()}


def load_spec(args: argparse.Namespace) -> LatencyTargetSpec:
    """The LatencyTarget spec from --manifest, with --ttft/--itl/--e2e/--window on top."""
    if args.manifest_doc is not None:
        manifest = copy.deepcopy(args.manifest_doc)
        manifest.setdefault("metadata", {})["namespace"] = args.namespace
        manifest.setdefault("spec", {}).setdefault("targetRef", {})["name"] = args.deployment
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

    def __init__(self, args: argparse.Namespace, out: TextIO) -> None:
        self.args, self.out = args, out
        self.scraped: ScrapeSource | None = None

    async def __call__(self, spec: LatencyTargetSpec, namespace: str, name: str) -> MetricsSource:
        args = self.args
        if args.prometheus_url:
            token = None
            if args.prometheus_bearer_token_file:
                path = Path(args.prometheus_bearer_token_file)
                try:
                    token = (await asyncio.to_thread(path.read_text)).strip()
                except OSError as exc:
                    raise UsageError(f"--prometheus-bearer-token-file {path}: {exc}") from exc
            return PrometheusSource(
                PrometheusSettings(
                    url=args.prometheus_url, bearer_token=token, ca_file=args.prometheus_ca_file
                )
            )
        # Direct scrape: sample every pod over the window, label it as Prometheus would.
        targets = [
            ScrapeTarget(url, {"namespace": args.namespace, "pod": f"{args.deployment}-pod-{i}"})
            for i, url in enumerate(args.scrape)
        ]
        self.scraped = scrape = ScrapeSource(lambda: targets)
        try:
            interval = parse_duration(args.scrape_interval)
        except ValueError as exc:
            raise UsageError(f"--scrape-interval: {exc}") from None
        window = spec.evaluation.window_seconds
        progress = ScrapeProgress(window, len(targets), interval, self.out)
        started = time.monotonic()
        while True:
            await scrape.scrape_once()
            elapsed = time.monotonic() - started
            if elapsed >= window:
                break
            progress.tick(elapsed)
            await asyncio.sleep(interval)
        progress.done(elapsed)
        return _JustSampled(scrape)


class ScrapeProgress:
    """Lines on stderr while ``--scrape`` samples the window, so a 5-minute window is not five
    silent minutes: one at the start, one about every tenth of the window, one at the end."""

    def __init__(self, window: float, pods: int, interval: float, out: TextIO) -> None:
        self.window, self.out, self.scrapes = window, out, 0
        self.every = max(window / 10, interval)
        self.next = self.every
        self._say(
            f"scraping {pods} pod(s) every {format_duration(interval)} for "
            f"{format_duration(window)} (the measurement window)"
        )

    def tick(self, elapsed: float) -> None:
        self.scrapes += 1
        if elapsed >= self.next:
            self.next += self.every
            self._say(
                f"scraped {format_duration(round(elapsed))} of {format_duration(self.window)} "
                f"({self.scrapes} scrapes)"
            )

    def done(self, elapsed: float) -> None:
        self._say(f"window sampled ({format_duration(round(elapsed))}); diagnosing")

    def _say(self, text: str) -> None:
        print(f"latency-tuner diagnose: {text}", file=self.out, flush=True)


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
        from latency_tuner.adapters.kubernetes.deployments import Deployments as KubeDeployments
        from latency_tuner.adapters.kubernetes.nodes import Nodes as KubeNodes

        instead = ", or read the Deployment from a file with --deployment-file"
        client = await asyncio.to_thread(cluster_client, args.kubeconfig, instead=instead)
        deployments, nodes = KubeDeployments(client), KubeNodes(client)
    metrics = _Metrics(args, sys.stderr)
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
    if not isinstance(observation, Observation):
        return None
    cl = facts.command_line
    proposal: Change | Exhausted | None
    if analysis.diagnosis.causes:
        proposal = propose(spec, analysis.diagnosis, observation, cl, facts.hardware)
    elif analysis.usable is not None and spec.mode is Mode.AUTO:
        # Targets met: what the operator would still try for margin, if anything.
        proposal = propose_margin(spec, observation, cl, facts.hardware)
    else:
        proposal = None
    if proposal is None:
        return None
    if isinstance(proposal, Exhausted):
        return {"exhausted": proposal.reason, "advice": list(proposal.advice)}
    target = target_container(proposal, cl, facts.container)
    patch = container_patch(facts.deployment, facts.container_index, target, facts.gpu_resource)
    return recommendation_of(proposal, patch)


def recommendation_of(proposal: Change, patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The recommendation as printed (``--json``): the change in words has no "None" in it."""
    return {
        "knob": proposal.knob.value,
        "from": proposal.from_value,  # null: the flag is absent (vLLM's default applies)
        "to": proposal.to_value,  # null: the flag is removed
        "change": proposal.describe(),  # in words, defaults and companion flags spelled out
        "class": proposal.knob_class.value,
        "reason": proposal.reason,
        "patch": patch,
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
        lines.append(
            "Recommendation: none (targets met and no change worth a trial for margin, "
            "or nothing measurable)"
        )
    elif "exhausted" in recommendation:
        lines.append(f"Recommendation: nothing safe left to try: {recommendation['exhausted']}")
    else:
        lines.append(f"Recommendation: {recommendation['change']} ({recommendation['reason']})")
        lines.append("Patch (kubectl patch deployment ... --type=json -p '<below>'):")
        lines.append(json.dumps(recommendation["patch"]))
    return "\n".join(lines)


def main(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    args = parser().parse_args(list(argv))
    try:
        resolve(args, os.environ if environ is None else environ)
        spec = load_spec(args)
        facts = asyncio.run(observe(args, spec))
    except (UsageError, NoCluster) as exc:
        print(f"latency-tuner diagnose: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ClusterError, urllib3.exceptions.HTTPError) as exc:
        # The cluster named by the kubeconfig did not answer (or refused): one line, no trace.
        print(f"latency-tuner diagnose: the cluster did not answer: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if isinstance(facts, Blocked) or isinstance(facts.windows.current, MetricsFailure):
        code, message = _problem(args, facts)
        print(f"latency-tuner diagnose: {message}", file=sys.stderr)
        return code
    analysis = analyse(
        spec, facts.windows.current, facts.command_line, facts.hardware, image=facts.container.image
    )
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
        print(f"latency-tuner diagnose: no data: {obs.reason} ({_where(args, spec)})",
              file=sys.stderr)  # fmt: skip
        return EXIT_NO_DATA
    return 0


def _where(args: argparse.Namespace, spec: LatencyTargetSpec) -> str:
    """Where the series were looked for, so an empty answer can be checked by hand."""
    matchers = selector(spec, args.namespace)
    if args.scrape:
        # Scraped series carry made-up pod names: they are selected by namespace only.
        kept = promql.selector([m for m in matchers if m.label != "pod"])
        return f"series {{{kept}}} scraped from {', '.join(args.scrape)}"
    return f"series {{{promql.selector(matchers)}}} in Prometheus at {args.prometheus_url}"


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
