"""`latency-tuner report NAME`: the report of a live LatencyTarget (Markdown, PNG, JSON), the
same one the demo writes, from its spec, status and events and its Deployment, read only.

Run it before an instance is torn down to keep what tuning found and what it cost. Exit codes:
0 written, 2 bad usage or no cluster, 4 no such LatencyTarget, 5 the cluster did not answer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes
import urllib3

from latency_tuner.adapters.kubernetes.client import NotFound, Rest, namespaced
from latency_tuner.adapters.kubernetes.deployments import deployment_path
from latency_tuner.api.resource import GROUP, PLURAL, VERSION
from latency_tuner.cli._kube import NoCluster, cluster_client
from latency_tuner.controller.errors import ClusterError
from latency_tuner.report import build_report, to_json, write
from latency_tuner.settings import ENV_PREFIX

EXIT_USAGE, EXIT_NOT_FOUND, EXIT_UNREACHABLE = 2, 4, 5


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latency-tuner report",
        description="Write the report of a LatencyTarget (report.md, trials.png, result.json): "
        "trials, arguments before and after, diagnosis, events, and what tuning cost "
        "(rollouts, trials, GPU-hours spent in trials).",
    )
    p.add_argument("name", metavar="NAME", help="the LatencyTarget")
    p.add_argument(
        "-n", "--namespace", help="its namespace (default: the kubeconfig context's, or default)"
    )
    p.add_argument(
        "--out",
        type=Path,
        help="folder for the files (default: reports/NAMESPACE-NAME-<UTC time>)",
    )
    p.add_argument(
        "--kubeconfig",
        help=f"kubeconfig file [{ENV_PREFIX}KUBECONFIG] (default: in-cluster, then $KUBECONFIG, "
        "then ~/.kube/config)",
    )
    p.add_argument("--json", action="store_true", help="print result.json instead of report.md")
    return p


def fetch(
    client: Any, namespace: str, name: str
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """The LatencyTarget, its events and its Deployment (None when gone). Read only."""
    rest = Rest(client)
    target: dict[str, Any] = rest("GET", namespaced(GROUP, VERSION, namespace, PLURAL, name))
    selector = f"involvedObject.kind=LatencyTarget,involvedObject.name={name}"
    events = rest(
        "GET", namespaced("", "v1", namespace, "events"), query={"fieldSelector": selector}
    )
    deployment_name = ((target.get("spec") or {}).get("targetRef") or {}).get("name")
    deployment = None
    if deployment_name:
        with contextlib.suppress(NotFound):  # a report of a target whose Deployment is gone
            deployment = rest("GET", deployment_path(namespace, deployment_name))
    return target, list(events.get("items") or []), deployment


def _namespace(args: argparse.Namespace, kubeconfig: str | None) -> str:
    if args.namespace:
        return str(args.namespace)
    try:
        _, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    except (kubernetes.config.ConfigException, OSError):
        return "default"
    return str(((active or {}).get("context") or {}).get("namespace") or "default")


def main(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    args = parser().parse_args(list(argv))
    env = os.environ if environ is None else environ
    kubeconfig = args.kubeconfig or env.get(f"{ENV_PREFIX}KUBECONFIG") or None
    try:
        client = cluster_client(kubeconfig)
        namespace = _namespace(args, kubeconfig)
        target, events, deployment = fetch(client, namespace, args.name)
    except NoCluster as exc:
        print(f"latency-tuner report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NotFound:
        print(f"latency-tuner report: LatencyTarget {namespace}/{args.name} not found",
              file=sys.stderr)  # fmt: skip
        return EXIT_NOT_FOUND
    except (ClusterError, urllib3.exceptions.HTTPError) as exc:
        print(f"latency-tuner report: the cluster did not answer: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    report = build_report(target, events=events, deployment=deployment, now=datetime.now(UTC))
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    folder = args.out or Path("reports") / f"{namespace}-{args.name}-{stamp}"
    page = write(report, folder)
    if args.json:
        print(json.dumps(to_json(report), indent=2))
    else:
        print(page.read_text())
        print(f"report: {page}  plot: {folder / 'trials.png'}  data: {folder / 'result.json'}")
    return 0
