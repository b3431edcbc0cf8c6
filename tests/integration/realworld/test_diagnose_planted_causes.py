"""``latency-tuner diagnose`` names each planted cause and its first knob, from a real Prometheus.

Every scenario is one simulated vLLM pod with one cause planted in its command line and load;
all run at once (one Prometheus scraping them all every second, bench loads in this process),
then ``latency-tuner diagnose`` runs as a real subprocess per scenario over the last
``WINDOW``. The targets come from ``sim predict`` (checked by the first test): each planted cause
is clearly over its target, and the healthy case clearly within.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.integration.realworld.support import (
    LLAMA_8B,
    LLAMA_70B,
    NAMESPACE,
    BackgroundLoads,
    DiagnoseRun,
    Load,
    Server,
    deployment,
    prometheus_or_skip,
    run_diagnose,
    scrape,
    start_servers,
    write_yaml,
)

from latency_tuner.loadgen.results import BenchResult
from latency_tuner.perf.config import build_engine_config
from latency_tuner.sandbox.prometheus import free_port
from latency_tuner.simulator.predict import predict
from latency_tuner.vllm.args import VllmCommandLine

WINDOW = "12s"
WARMUP_SECONDS = 3.0  # the first requests of a closed loop arrive together: leave them out
AWQ_70B = "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"


pytestmark = pytest.mark.prometheus  # a real Prometheus scrapes the simulators


@dataclass(frozen=True)
class Planted:
    """A server with one cause planted, the load that exposes it, and diagnose's objective."""

    server: Server
    load: Load
    objective: tuple[str, ...]  # e.g. ("--ttft", "p90=300ms")
    hardware: tuple[str, ...] = ()


PLANTED: dict[str, Planted] = {
    # 2 slots for 16 clients: requests wait ~7 services of ~0.2 s before they run.
    "queueing": Planted(
        Server("queueing", LLAMA_8B, ("--max-model-len", "4096", "--max-num-seqs", "2")),
        Load(concurrency=16, prompt_tokens=256, output_tokens=32),
        ("--ttft", "p90=300ms"),
        ("--gpu", "H100-SXM"),
    ),
    # 4096-token prompts, 3584 of them a shared system prompt that is recomputed every time.
    "long-prefill": Planted(
        Server("long-prefill", LLAMA_8B, ("--max-model-len", "8192", "--no-enable-prefix-caching")),
        # One client: nothing ever waits, so the prefill is the whole of TTFT whatever the
        # machine's load does to the scheduler's timing (with two, one could wait for the
        # other's chunk, and a loaded CI machine read that wait as queueing).
        Load(concurrency=1, prompt_tokens=4096, output_tokens=16, shared_prefix_tokens=3584),
        ("--ttft", "p90=40ms"),
        ("--gpu", "H100-SXM"),
    ),
    # A 70B model on A100s at concurrency 1: every step reads 70 GB of weights.
    "decode-bandwidth": Planted(
        Server(
            "decode-bandwidth",
            LLAMA_70B,
            ("--max-model-len", "4096", "--tensor-parallel-size", "2"),
            gpu="A100-80G",
            gpus=2,
        ),
        Load(concurrency=1, prompt_tokens=256, output_tokens=64),
        ("--itl", "p90=25ms"),
        ("--gpu", "A100-80G", "--interconnect", "NVLink"),
    ),
    # Unchunked 4096-token prefills stall 8 running decodes for a whole ~90 ms step.
    "interference": Planted(
        Server(
            "interference", LLAMA_8B, ("--max-model-len", "8192", "--no-enable-chunked-prefill")
        ),
        Load(concurrency=8, prompt_tokens=4096, output_tokens=64),
        ("--itl", "p99=40ms"),
        ("--gpu", "H100-SXM"),
    ),
    # 9.6k tokens of KV cache for 6 requests of 3.3k tokens each: preemptions, and half the
    # clients wait for blocks. (With 16k tokens, a CPU-starved client process kept ~4 in
    # flight, which the cache nearly held: TTFT p90 155 ms, within the target, in a CI run.
    # More clients instead starve the other scenarios' clients, which share this process.)
    "kv-pressure": Planted(
        Server(
            "kv-pressure",
            LLAMA_8B,
            ("--max-model-len", "8192", "--gpu-memory-utilization", "0.24"),
        ),
        Load(concurrency=6, prompt_tokens=3072, output_tokens=256),
        ("--ttft", "p90=200ms"),
        ("--gpu", "H100-SXM"),
    ),
    "eager": Planted(
        Server("eager", LLAMA_8B, ("--max-model-len", "4096", "--enforce-eager")),
        Load(concurrency=2, prompt_tokens=256, output_tokens=64),
        ("--itl", "p90=5ms"),
        ("--gpu", "H100-SXM"),
    ),
    "cpu-offload": Planted(
        Server("cpu-offload", LLAMA_8B, ("--max-model-len", "4096", "--cpu-offload-gb", "10")),
        Load(concurrency=2, prompt_tokens=256, output_tokens=16),
        ("--itl", "p90=50ms"),
        ("--gpu", "H100-SXM"),
    ),
}


@dataclass(frozen=True)
class Extra:
    """Another diagnose run over a planted server: other objectives, a manifest, a name."""

    of: str  # the PLANTED scenario whose server and Deployment file it uses
    args: tuple[str, ...]


def _manifest_with_awq_variant() -> dict[str, object]:
    return {
        "apiVersion": "tuning.latencytuner.io/v1alpha1",
        "kind": "LatencyTarget",
        "metadata": {"name": "decode-bandwidth", "namespace": NAMESPACE},
        "spec": {
            "targetRef": {"name": "decode-bandwidth"},
            "objectives": {"itl": {"percentile": 90, "threshold": "25ms"}},
            "knobs": {"quantization": {"variants": [{"name": "awq-int4", "model": AWQ_70B}]}},
        },
    }


def _not_vllm_deployment() -> dict[str, object]:
    return deployment(
        "tgi",
        {
            "name": "tgi",
            "image": "ghcr.io/huggingface/text-generation-inference:3.0",
            "args": ["--model-id", LLAMA_8B, "--max-input-tokens", "4096"],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
        },
    )


@dataclass(frozen=True)
class Diagnoses:
    runs: dict[str, DiagnoseRun]
    unreachable: DiagnoseRun
    not_vllm: DiagnoseRun
    loads: dict[str, BenchResult]  # what the clients saw, to explain a failure

    def __getitem__(self, name: str) -> DiagnoseRun:
        return self.runs[name]

    def explain(self, name: str) -> str:
        """The diagnose run's output and what the clients of its server measured."""
        scenario = next((p for p in self.loads if name.startswith(p)), None)
        if scenario is None:
            return self.runs[name].explain()
        bench = self.loads[scenario].to_json_dict()
        bench.pop("config")
        return f"{self.runs[name].explain()}\nbench of {scenario}: {bench}"


def _common(name: str, deployment_file: Path, prometheus_url: str) -> list[str]:
    return [
        "--prometheus", prometheus_url, "--deployment-file", str(deployment_file),
        "--namespace", NAMESPACE, "--deployment", name, "--window", WINDOW, "--json",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def diagnoses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Diagnoses]:
    folder = tmp_path_factory.mktemp("planted")
    files = {name: write_yaml(folder, name, p.server.manifest()) for name, p in PLANTED.items()}
    manifest = write_yaml(folder, "awq-target", _manifest_with_awq_variant())
    tgi = write_yaml(folder, "tgi", _not_vllm_deployment())
    with (
        prometheus_or_skip() as prometheus,
        start_servers([p.server for p in PLANTED.values()]) as servers,
    ):
        scrape(prometheus, list(servers.values()))
        url = prometheus.url

        def planted(name: str, *more: str) -> list[str]:
            p = PLANTED[name]
            return [*_common(name, files[name], url), *p.objective, *p.hardware, *more]

        extra = {
            "decode-bandwidth-with-awq-variant": [
                *_common("decode-bandwidth", files["decode-bandwidth"], url),
                "--manifest", str(manifest), *PLANTED["decode-bandwidth"].hardware,
            ],
            # The 70B server meets generous targets: ITL ~47 ms, TTFT ~0.1 s.
            "targets-met": [
                *_common("decode-bandwidth", files["decode-bandwidth"], url),
                "--itl", "p90=200ms", "--ttft", "p90=2s",
                *PLANTED["decode-bandwidth"].hardware,
            ],
            "wrong-deployment-name": [
                *_common("no-such-deployment", files["queueing"], url), "--ttft", "p90=300ms",
            ],
        }  # fmt: skip

        async def plant_and_diagnose() -> Diagnoses:
            loads = BackgroundLoads()
            for name, p in PLANTED.items():
                loads.start(servers[name].url, p.load)
            window_ends = time.monotonic() + WARMUP_SECONDS + float(WINDOW.removesuffix("s"))
            # Two at a time: a burst of ten Python processes would starve the loads and the
            # servers on two cores while the later queries of each run are still evaluated.
            slots = asyncio.Semaphore(2)

            async def one(args: list[str]) -> DiagnoseRun:
                async with slots:
                    return await run_diagnose(*args)

            try:
                # The error cases need no load: they run while the loads warm up.
                unreachable = await run_diagnose(
                    *_common("queueing", files["queueing"], f"http://127.0.0.1:{free_port()}"),
                    "--ttft", "p90=300ms",
                )  # fmt: skip
                not_vllm = await run_diagnose(*_common("tgi", tgi, url), "--ttft", "p90=300ms")
                await asyncio.sleep(max(0.0, window_ends - time.monotonic()))
                arguments = {name: planted(name) for name in PLANTED} | extra
                results = await asyncio.gather(*(one(a) for a in arguments.values()))
            finally:
                benches = dict(zip(PLANTED, await loads.stop(), strict=True))
            runs = dict(zip(arguments, results, strict=True))
            return Diagnoses(runs, unreachable, not_vllm, benches)

        yield asyncio.run(plant_and_diagnose())


def test_the_targets_are_chosen_so_each_planted_cause_misses_them() -> None:
    # sim predict: the idle-engine cost of each planted configuration against its target.
    long_prefill = predict(LLAMA_8B, "H100-SXM", prompt_tokens=4096, output_tokens=16)
    assert long_prefill.ttft_ms > 2 * 40
    big_model = predict(LLAMA_70B, "A100-80G", tp=2, prompt_tokens=256, output_tokens=64)
    assert big_model.itl_ms > 1.5 * 25
    assert big_model.itl_ms < 200 / 2  # the "targets met" case
    assert big_model.ttft_ms < 2000 / 4
    eager = predict(LLAMA_8B, "H100-SXM", prompt_tokens=256, output_tokens=64, enforce_eager=True)
    assert eager.itl_ms > 1.5 * 5
    offload = predict(LLAMA_8B, "H100-SXM", prompt_tokens=256, output_tokens=16, cpu_offload_gb=10)
    assert offload.itl_ms > 3 * 50
    # Interference: a decode step of 8 requests meets 40 ms; one that waits for an unchunked
    # 4096-token prefill (a step as long as that prompt's TTFT) does not.
    decode = predict(LLAMA_8B, "H100-SXM", prompt_tokens=4096, output_tokens=64, batch=8)
    assert decode.itl_ms < 40 / 2
    assert decode.itl_ms + long_prefill.ttft_ms > 2 * 40
    # Queueing: 16 closed-loop clients on 2 slots wait for ~7 services of the 2 running.
    slot = predict(LLAMA_8B, "H100-SXM", prompt_tokens=256, output_tokens=32, batch=2)
    service_ms = slot.ttft_ms + 31 * slot.itl_ms
    assert (16 / 2 - 1) * service_ms > 3 * 300
    # KV pressure: the KV cache holds the contexts of fewer than half the clients, so even a
    # client process too slow to keep them all in flight leaves requests waiting for blocks.
    kv = PLANTED["kv-pressure"]
    config = build_engine_config(
        VllmCommandLine.parse(None, [kv.server.model, *kv.server.vllm_flags]),
        gpu="H100-SXM",
        num_gpus=1,
    )
    context = kv.load.prompt_tokens + kv.load.output_tokens
    assert config.num_gpu_blocks * config.block_size < kv.load.concurrency / 2 * context


def test_requests_queueing_behind_a_low_max_num_seqs_raise_it_first(diagnoses: Diagnoses) -> None:
    run = diagnoses["queueing"]
    why = diagnoses.explain("queueing")
    assert run.exit_code == 0, why
    assert run.bottleneck == "Queueing", why
    assert run.recommended_knob == "maxNumSeqs", why
    assert run.report["recommendation"]["from"] == "2"
    obs = run.observation
    # vLLM records queue time when a request finishes, TTFT at its first token: the recorded
    # share lags whenever the queue grows within the window. The diagnosis also reads the wait
    # from the waiting gauge (Little's law) and judges on the larger; that is what must hold.
    evidence = {e["signal"]: e for e in run.report["diagnosis"]["evidence"]}
    assert evidence["queue_time_share"]["value"] >= 0.5, why
    little = obs["waiting_mean"] / obs["request_rate"]
    assert max(obs["queue_time_mean"], little) > 0.5 * obs["ttft_mean"], why
    assert obs["running_max"] == pytest.approx(2)


def test_a_long_shared_prefix_recomputed_every_time_enables_prefix_caching_first(
    diagnoses: Diagnoses,
) -> None:
    run = diagnoses["long-prefill"]
    why = diagnoses.explain("long-prefill")
    assert run.exit_code == 0, why
    assert run.bottleneck == "LongPrefill", why
    assert run.recommended_knob == "prefixCaching", why
    obs = run.observation
    assert obs["prompt_tokens_mean"] > 3000  # a windowed ratio of two counters: not exact
    assert obs["prefill_time_mean"] > obs["queue_time_mean"]
    assert obs["cache_config"]["enable_prefix_caching"] == "False"


def test_a_70b_model_at_concurrency_one_on_a100_is_bound_by_memory_bandwidth(
    diagnoses: Diagnoses,
) -> None:
    run = diagnoses["decode-bandwidth"]
    why = diagnoses.explain("decode-bandwidth")
    assert run.exit_code == 0, why
    assert run.bottleneck == "DecodeBandwidth", why
    assert run.observation["running_mean"] <= 1.5
    words = " ".join(run.report["diagnosis"]["advice"]).lower()
    assert "bandwidth" in words or "quantiz" in words, why
    # Without a LatencyTarget allowing lossy or costly knobs there is nothing safe to change.
    rec = run.report["recommendation"]
    assert rec is None or "exhausted" in rec or rec["knob"] == "speculativeDecoding", why


def test_a_listed_quantized_variant_is_the_first_change_for_decode_bandwidth(
    diagnoses: Diagnoses,
) -> None:
    run = diagnoses["decode-bandwidth-with-awq-variant"]
    why = diagnoses.explain("decode-bandwidth-with-awq-variant")
    assert run.exit_code == 0, why
    assert run.bottleneck == "DecodeBandwidth", why
    assert run.recommended_knob == "quantization", why
    assert run.report["recommendation"]["to"] == "awq-int4"
    assert AWQ_70B in str(run.report["recommendation"]["patch"])


def test_long_unchunked_prefills_among_decodes_enable_chunked_prefill_first(
    diagnoses: Diagnoses,
) -> None:
    run = diagnoses["interference"]
    why = diagnoses.explain("interference")
    assert run.exit_code == 0, why
    assert run.bottleneck == "PrefillInterference", why
    assert run.recommended_knob == "chunkedPrefill", why
    itl = run.observation["itl"]
    assert itl["99"] > 2.5 * itl["50"]
    assert itl["50"] <= 0.040


def test_preemptions_from_a_small_kv_cache_raise_gpu_memory_utilization_first(
    diagnoses: Diagnoses,
) -> None:
    run = diagnoses["kv-pressure"]
    why = diagnoses.explain("kv-pressure")
    assert run.exit_code == 0, why
    assert run.bottleneck == "KVCachePressure", why
    assert run.observation["preemptions"] > 0
    assert run.recommended_knob == "gpuMemoryUtilization", why
    planted = PLANTED["kv-pressure"].server.vllm_flags
    utilization = float(planted[planted.index("--gpu-memory-utilization") + 1])
    assert float(run.report["recommendation"]["to"]) > utilization


def test_enforce_eager_is_found_and_removed_first(diagnoses: Diagnoses) -> None:
    run = diagnoses["eager"]
    why = diagnoses.explain("eager")
    assert run.exit_code == 0, why
    assert "EagerMode" in run.findings, why
    assert "CpuOffload" not in run.findings
    assert run.recommended_knob == "enforceEager", why
    assert "--enforce-eager" not in str(run.report["recommendation"]["patch"])


def test_cpu_offload_is_found_and_removed_first(diagnoses: Diagnoses) -> None:
    run = diagnoses["cpu-offload"]
    why = diagnoses.explain("cpu-offload")
    assert run.exit_code == 0, why
    assert "CpuOffload" in run.findings, why
    assert "EagerMode" not in run.findings
    assert run.recommended_knob == "cpuOffloadGb", why


def test_a_server_within_its_targets_gets_no_recommendation(diagnoses: Diagnoses) -> None:
    run = diagnoses["targets-met"]
    why = diagnoses.explain("targets-met")
    assert run.exit_code == 0, why
    assert run.bottleneck == "None", why
    assert run.report["recommendation"] is None
    assert run.observation["requests"] > 0


def test_a_deployment_name_without_series_is_no_data_with_exit_code_4(
    diagnoses: Diagnoses,
) -> None:
    run = diagnoses["wrong-deployment-name"]
    why = diagnoses.explain("wrong-deployment-name")
    assert run.exit_code == 4, why
    assert "no data" in run.stderr
    assert "no vLLM request series match the selector" in run.stderr
    assert run.report["recommendation"] is None


def test_an_unreachable_prometheus_is_exit_code_5_naming_it(diagnoses: Diagnoses) -> None:
    run = diagnoses.unreachable
    assert run.exit_code == 5, run.explain()
    assert "Prometheus at http://127.0.0.1:" in run.stderr
    assert "unreachable" in run.stderr
    assert run.stdout == ""


def test_a_deployment_that_is_not_vllm_is_exit_code_3(diagnoses: Diagnoses) -> None:
    run = diagnoses.not_vllm
    assert run.exit_code == 3, run.explain()
    assert "vllm" in run.stderr.lower()
    assert run.stdout == ""
