"""Anyone can tell what the operator did and why: every patch of a Deployment names the
LatencyTarget, the trial, rollback or restore and the changed arguments (change-cause and
latencytuner.io annotations, field manager latency-tuner); a down or wrong Prometheus turns
Ready False with a short cause and posts one Warning; events come From latency-tuner; each
decision is one log line naming the target. kopf against the API emulator, real Prometheus.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.operator.harness import (
    APPS,
    DEPLOYMENT,
    LT_API,
    NAMESPACE,
    SEQS_ONLY,
    World,
    by_seqs,
    cluster,
    condition,
    eventually,
    latency_target,
    operator_running,
    posted,
    queueing,
)

from latency_tuner.core.rollout import Reason
from latency_tuner.sandbox.prometheus import PrometheusRunner, binary
from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [MODEL, "--max-num-seqs", "16"]
CAUSE = "kubernetes.io~1change-cause"
LAST = "latencytuner.io~1last-change"
TARGET = "latencytuner.io~1latency-target"


def worse_with_32(cl: VllmCommandLine) -> float:
    return 3.0 if int(cl.get("max-num-seqs") or 1024) == 32 else 2.0


def patch_annotations(world: World) -> list[dict[str, Any]]:
    """The annotations each PATCH of the Deployment set, in order, with the field manager."""
    path = f"/apis/{APPS}/namespaces/{NAMESPACE}/deployments/{DEPLOYMENT}"
    found = []
    for request in list(world.api.emulator):
        if getattr(request.method, "value", request.method) != "PATCH":
            continue
        if request.url.path.rstrip("/") != path:
            continue
        ops = {op["path"].rsplit("/", 1)[-1]: op.get("value") for op in request.data or []}
        found.append(
            {
                "manager": request.url.query.get("fieldManager"),
                "cause": ops.get(CAUSE),
                "target": ops.get(TARGET),
                "last": ops.get(LAST),
            }
        )
    return found


async def test_a_trial_and_its_rollback_say_on_the_deployment_who_changed_what_and_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="latency_tuner")
    async with cluster(tmp_path, queueing(worse_with_32), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path):
            await posted(world, Reason.ROLLED_BACK, within=30)
            deployment = await world.deployment()
    trial, rollback = patch_annotations(world)[:2]
    assert trial["manager"] == rollback["manager"] == "latency-tuner"
    assert trial["cause"] == (
        "latency-tuner, LatencyTarget ml/llama-latency: trial 1 (maxNumSeqs): "
        "--max-num-seqs: 16 -> 32"
    )
    assert rollback["cause"] == (
        "latency-tuner, LatencyTarget ml/llama-latency: rollback of trial 1 (maxNumSeqs): "
        "--max-num-seqs: 32 -> 16"
    )
    assert trial["target"] == "ml/llama-latency"
    assert json.loads(rollback["last"] or "{}") == {
        "action": "rollback",
        "trial": 1,
        "knob": "maxNumSeqs",
        "changes": ["--max-num-seqs: 32 -> 16"],
    }
    annotations = deployment["metadata"]["annotations"]
    assert annotations["kubernetes.io/change-cause"] == rollback["cause"]
    assert annotations["latencytuner.io/latency-target"] == "ml/llama-latency"
    lines = [r.getMessage() for r in caplog.records if r.name == "latency_tuner.operator"]
    assert "ml/llama-latency: phase Observing -> RollingOut" in lines
    assert any(line.startswith("ml/llama-latency: TrialStarted: ") for line in lines)
    assert any(line.startswith("ml/llama-latency: Reverting: trial 1") for line in lines)
    assert f"ml/llama-latency: patched the Deployment: {trial['cause']}" in lines
    assert all("\n" not in line for line in lines)


async def test_a_restore_on_delete_says_so_on_the_deployment(tmp_path: Path) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY, onDelete="Restore"))
        async with operator_running(world, tmp_path):

            async def kept() -> bool:
                trials = (await world.status()).get("trials") or []
                return bool(trials and trials[0]["verdict"] == "Keep")

            await eventually(kept, within=30, every=0.05)
            await world.api.delete(LT_API, "LatencyTarget", "llama-latency", namespace=NAMESPACE)
            (restored,) = await posted(world, Reason.RESTORED)
            deployment = await world.deployment()
    restore = patch_annotations(world)[-1]
    assert restore["manager"] == "latency-tuner"
    assert restore["cause"] is not None
    assert restore["cause"].startswith(
        "latency-tuner, LatencyTarget ml/llama-latency: restore of the original arguments"
    )
    # From where tuning stood (trial 2 may have started) back to the original 16.
    assert re.search(r": --max-num-seqs: (32|64) -> 16$", restore["cause"])
    assert deployment["metadata"]["annotations"]["kubernetes.io/change-cause"] == restore["cause"]
    assert json.loads(restore["last"] or "{}")["action"] == "restore"
    assert re.search(r"of Deployment llama: --max-num-seqs: (32|64) -> 16$", restored["message"])


@pytest.fixture
def prometheus() -> Iterator[PrometheusRunner]:
    if binary() is None:
        pytest.skip("prometheus is not installed (scripts/setup.sh installs it as root)")
    with PrometheusRunner(scrape_interval="1s") as prom:
        yield prom


@pytest.mark.prometheus
async def test_a_prometheus_that_goes_down_turns_ready_false_with_one_warning_from_latency_tuner(
    tmp_path: Path, prometheus: PrometheusRunner
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path, prometheus_url=prometheus.url):

            async def no_data() -> dict[str, Any] | None:
                status = await world.status()
                metrics = condition(status, "MetricsAvailable")
                return status if metrics and metrics["reason"] == "NoData" else None

            up = await eventually(no_data, within=20)
            prometheus.stop()
            (warning,) = await posted(world, "MetricsSourceError", within=20)
            await asyncio.sleep(2.0)  # several reconciles while it stays down
            down = await world.status()
            warnings = await world.events("MetricsSourceError")
    assert (condition(up, "Ready") or {}).get("status") == "True"  # no data is no fault
    ready = condition(down, "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "MetricsSourceError")
    assert ready["message"] == f"Prometheus at {prometheus.url} is unreachable: connection refused"
    assert warning["type"] == "Warning"
    # The Warning carries the first failure seen: a Prometheus stopping gracefully answers 503
    # for a moment before its port closes, so either is right; the status ends on the refusal.
    assert warning["message"] in (
        ready["message"],
        f"Prometheus at {prometheus.url} answered with an error: "
        "HTTP 503: unavailable (Prometheus starting or stopping, or a proxy with no server "
        "behind it)",
    )
    assert warning["source"]["component"] == "latency-tuner"
    assert warning["reportingComponent"] == "latency-tuner"
    assert len(warnings) == 1  # a source that stays down is one Warning, not one per reconcile


class _NotPrometheus(http.server.BaseHTTPRequestHandler):
    """A web server at the configured URL that is not Prometheus (a wrong URL)."""

    def do_GET(self) -> None:
        page = b"<html><body>\n<h1>404 Not Found</h1>\n<hr>nginx\n</body></html>\n"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def not_prometheus() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotPrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


async def test_a_wrong_prometheus_url_says_so_in_one_short_line(
    tmp_path: Path, not_prometheus: str
) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target(knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path, prometheus_url=not_prometheus):
            (warning,) = await posted(world, "MetricsSourceError", within=20)
            status = await world.status()
    ready = condition(status, "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "MetricsSourceError")
    assert ready["message"] == (
        f"Prometheus at {not_prometheus} answered with an error: "
        "HTTP 404: not found (is the URL a Prometheus server, with its path prefix?)"
    )
    assert warning["source"]["component"] == "latency-tuner"


async def test_a_conflict_posts_its_warning_from_latency_tuner(tmp_path: Path) -> None:
    async with cluster(tmp_path, queueing(by_seqs), ARGS) as world:
        await world.api.create(latency_target("first", knobs=SEQS_ONLY, mode="Recommend"))
        await world.api.create(latency_target("second", knobs=SEQS_ONLY))
        async with operator_running(world, tmp_path):
            (conflict,) = await posted(world, Reason.CONFLICT, within=20)
    assert conflict["type"] == "Warning"
    assert conflict["involvedObject"]["name"] == "second"
    assert conflict["source"]["component"] == "latency-tuner"
    assert conflict["metadata"]["name"].startswith("latency-tuner-")
