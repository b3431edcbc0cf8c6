"""`latency-tuner diagnose`: which stage of a live vLLM Deployment is slow, why, and the next
change to try, from its metrics, without touching the cluster.

The Deployment comes from a file (``--deployment-file``) or from the cluster (``--kubeconfig``,
read only); metrics from Prometheus (``--prometheus``) or, without one, from the pods'
``/metrics`` scraped directly (``--scrape URL ...``) over the window. Objectives come from a
LatencyTarget manifest or from ``--ttft p90=500ms`` style flags. The same diagnosis and planner
as the operator's produce the answer; the recommended change is printed as the exact JSON patch.

Exit codes: 0 done, 2 bad usage or input, 3 not a vLLM server, 4 no data, 5 metrics unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from latency_tuner.adapters.metrics import MetricsError
from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.adapters.metrics.scrape import ScrapeSource, ScrapeTarget
from latency_tuner.api.durations import format_duration, parse_duration
from latency_tuner.api.resource import InvalidLatencyTarget, LatencyTarget
from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.controller.gather import selector
from latency_tuner.core.cluster import ContainerConfig, container_patch
from latency_tuner.core.diagnosis import Diagnosis, diagnose
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.knobs import Change, apply
from latency_tuner.core.observation import NoData, Observation, ObservationResult
from latency_tuner.core.planner import Exhausted, plan
from latency_tuner.core.rollout import diagnosis_status
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

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
    try:
        return LatencyTarget.from_manifest(manifest).spec
    except InvalidLatencyTarget as exc:
        hint = " (give --ttft, --itl or --e2e, or --manifest)" if not objectives else ""
        raise UsageError("; ".join(exc.problems) + hint) from exc


def load_deployment(args: argparse.Namespace) -> tuple[dict[str, Any], HardwareInfo]:
    if args.deployment_file is not None:
        try:
            docs = [d for d in yaml.safe_load_all(args.deployment_file.read_text()) if d]
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"--deployment-file {args.deployment_file}: {exc}") from exc
        found = [d for d in docs if d.get("kind") == "Deployment"]
        if not found:
            raise UsageError(f"--deployment-file {args.deployment_file} holds no Deployment")
        return found[0], HardwareInfo()
    return asyncio.run(_read_cluster(args))


async def _read_cluster(args: argparse.Namespace) -> tuple[dict[str, Any], HardwareInfo]:
    from latency_tuner.adapters.kubernetes.client import make_api_client
    from latency_tuner.adapters.kubernetes.deployments import Deployments
    from latency_tuner.adapters.kubernetes.nodes import Nodes

    client = await asyncio.to_thread(make_api_client, args.kubeconfig)
    deployments = Deployments(client)
    view = await deployments.get(namespace=args.namespace, name=args.deployment)
    if view is None:
        raise UsageError(f"Deployment {args.namespace}/{args.deployment} not found")
    pods = await deployments.pods(view, container=args.container, gpu_resource="nvidia.com/gpu")
    for node in await Nodes(client).gpus(p.node for p in pods if p.node):
        if node.product:
            interconnect = node.interconnect if node.interconnect in ("NVLink", "PCIe") else None
            return view.obj, HardwareInfo.from_labels(
                node.product,
                interconnect=interconnect,  # type: ignore[arg-type]
                gpus_per_node=node.count,
            )
    return view.obj, HardwareInfo()


async def observe(args: argparse.Namespace, spec: LatencyTargetSpec) -> ObservationResult:
    window = spec.evaluation.window_seconds
    percentiles = [
        int(o.percentile)
        for o in (spec.objectives.ttft, spec.objectives.itl, spec.objectives.e2e)
        if o is not None
    ]
    if args.prometheus:
        token = None
        if args.bearer_token_file:
            token = (await asyncio.to_thread(Path(args.bearer_token_file).read_text)).strip()
        source = PrometheusSource(
            PrometheusSettings(url=args.prometheus, bearer_token=token, ca_file=args.ca_file)
        )
        return await source.observe(
            matchers=selector(spec, args.namespace), window_seconds=window, percentiles=percentiles
        )
    # Direct scrape: sample every pod over the window, label it as Prometheus would.
    targets = [
        ScrapeTarget(url, {"namespace": args.namespace, "pod": f"{args.deployment}-pod-{i}"})
        for i, url in enumerate(args.scrape)
    ]
    scrape = ScrapeSource(lambda: targets)
    interval = parse_duration(args.scrape_interval)
    started = time.monotonic()
    try:
        while True:
            await scrape.scrape_once()
            if time.monotonic() - started >= window:
                break
            await asyncio.sleep(interval)
        matchers = [m for m in selector(spec, args.namespace) if m.label != "pod"]
        return await scrape.observe(
            matchers=matchers, window_seconds=window, percentiles=percentiles
        )
    finally:
        await scrape.aclose()


def recommend(
    diagnosis: Diagnosis,
    observation: ObservationResult,
    cl: VllmCommandLine,
    spec: LatencyTargetSpec,
    hardware: HardwareInfo,
    deployment: dict[str, Any],
) -> dict[str, Any] | None:
    if not isinstance(observation, Observation) or not diagnosis.causes:
        return None
    proposal = plan(diagnosis, observation, cl, spec.knobs, hardware)
    if isinstance(proposal, Exhausted):
        return {"exhausted": proposal.reason, "advice": list(proposal.advice)}
    return _patch(proposal, cl, spec, deployment)


def _patch(
    change: Change, cl: VllmCommandLine, spec: LatencyTargetSpec, deployment: dict[str, Any]
) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    name = spec.target_ref.container
    index = next((i for i, c in enumerate(containers) if c.get("name") == name), 0)
    container = containers[index]
    applied = apply(change, cl)
    command, args = applied.command_line.render()
    gpu = ((container.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
    target = ContainerConfig(
        command=tuple(command) if command is not None else None,
        args=tuple(args) if args is not None else None,
        image=applied.image or container.get("image", ""),
        gpu_limit=applied.gpu_limit
        if applied.gpu_limit is not None
        else (int(gpu) if gpu else None),
    )
    return {
        "knob": change.knob.value,
        "from": change.from_value,
        "to": change.to_value,
        "class": change.knob_class.value,
        "reason": change.reason,
        "patch": container_patch(deployment, index, target, "nvidia.com/gpu"),
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
        deployment, hardware = load_deployment(args)
    except UsageError as exc:
        print(f"latency-tuner diagnose: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.gpu or args.interconnect:
        hardware = HardwareInfo.from_labels(
            hardware.gpu_product,
            interconnect=hardware.interconnect,
            gpus_per_node=hardware.gpus_per_node,
            override_product=args.gpu,
            override_interconnect=args.interconnect,
        )
    containers = deployment["spec"]["template"]["spec"]["containers"]
    container = next(
        (c for c in containers if c.get("name") == spec.target_ref.container), containers[0]
    )
    try:
        cl = VllmCommandLine.parse(container.get("command"), container.get("args"))
    except NotVllmError as exc:
        print(f"latency-tuner diagnose: {exc}", file=sys.stderr)
        return EXIT_NOT_VLLM
    try:
        obs = asyncio.run(observe(args, spec))
    except MetricsError as exc:
        print(f"latency-tuner diagnose: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    diagnosis = diagnose(
        obs, spec.objectives, cl, hardware, spec.knobs, min_requests=spec.evaluation.min_requests
    )
    recommendation = recommend(diagnosis, obs, cl, spec, hardware, deployment)
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
