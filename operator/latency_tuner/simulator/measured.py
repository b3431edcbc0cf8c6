"""Replays the setups of published end-to-end measurements (reference/measured_points.csv) on
the simulator, in virtual time, the way each was measured.

- ``batch=B (offline)``: vLLM's ``benchmark_latency``: B prompts at once, e2e of the batch;
  ITL = e2e / output tokens (the rows derive it so);
- ``Poisson R req/s``: ``benchmark_serving`` over a synthetic ShareGPT-like length mix (log-normal
  lengths with the row's means, clipped as the benchmark filters them); mean TTFT and mean ITL;
- ``closed-loop C``: C clients, each sends its next request when the previous one finished; means
  over the requests that ran at full concurrency; TTFT, TPOT and output tokens/s;
- a ratio of throughputs ("6.6x the concurrency-1 throughput") is replayed at both loads.
Rows measured on vLLM's V0 engine (the CI builds of late 2024, vLLM <= 0.7) saw each step's
tokens one step late: V0's async output processing handed step N's outputs to the server while
step N+1 ran and returned them when it finished. The replay of those rows reads a request's first
token at the end of the step after its prefill (V1, which the simulator models, sends outputs at
the end of their own step).
Rows it cannot model get a reason from ``unsupported_reason`` (e.g. TensorRT-LLM throughput at
offline max load: another engine). Reads one CSV; otherwise no I/O, no clock.
"""

from __future__ import annotations

import csv
import math
import random
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from latency_tuner.perf.config import build_engine_config
from latency_tuner.simulator.engine import RequestRecord, SimRequest, VirtualEngine
from latency_tuner.vllm.args import VllmCommandLine

__all__ = [
    "NOT_COMPARED",
    "REFERENCE_GPUS",
    "ClosedLoopResult",
    "MeasuredRow",
    "Replay",
    "load_measured_rows",
    "run_closed_loop_steady",
    "simulate_measured_row",
    "unsupported_reason",
]

# aiconfigurator's system names in latency_points.csv: its a100_sxm is the 80 GB SXM4 card (a bare
# "A100" resolves to the 40 GB one, conservatively).
REFERENCE_GPUS = {"a100_sxm": "A100-80G", "h100_sxm": "H100-SXM"}

_SHAREGPT_MAX_PROMPT = 1024  # benchmark_serving's ShareGPT filter
_SHAREGPT_MAX_OUTPUT = 1024
_SERVING_PROMPTS = 200


@dataclass(frozen=True)
class MeasuredRow:
    id: str
    model: str
    gpu: str  # canonical simulator name
    tp: int
    fp8_weights: bool
    fp8_kv: bool
    load: str  # "offline-batch", "poisson", "closed-loop", "offline-max"
    batch: int  # offline batch size, or closed-loop clients (1 for Poisson)
    rate_qps: float | None
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float | None
    itl_ms: float | None
    throughput: float | None  # output tok/s, or a ratio to the concurrency-1 run
    throughput_is_ratio: bool
    engine_note: str
    v0_engine: bool  # vLLM's V0 engine (before 0.8): outputs one step late

    @property
    def concurrency(self) -> int:
        return self.batch


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _gpu(text: str) -> str:
    upper = text.upper()
    memory = re.search(r"(\d+)\s*GB", upper)
    if "A100" in upper:
        size = memory.group(1) if memory else "40"  # no size given: the smaller card
        return f"A100-{size}G"
    if "H200" in upper:
        return "H200"
    if "H100" in upper:
        return "H100-PCIe" if "PCIE" in upper else "H100-SXM"
    return text


def _row(raw: dict[str, str]) -> MeasuredRow:
    notes = raw["notes"]
    found = re.search(r"id=([\w.]+)", notes)
    row_id = found.group(1) if found else raw["source"]
    model = raw["model"].split(" (")[0]
    load_text = raw["concurrency_or_rate"]
    rate = None
    if load_text.startswith("batch="):
        load, batch = "offline-batch", int(re.findall(r"\d+", load_text)[0])
    elif load_text.startswith("Poisson"):
        load, batch = "poisson", 1
        rate = float(re.findall(r"[\d.]+", load_text)[0])
    elif load_text.startswith("closed-loop"):
        load, batch = "closed-loop", int(re.findall(r"\d+", load_text)[0])
    else:
        load, batch = "offline-max", 0
    isl = re.findall(r"\d+", raw["isl"])
    osl = re.findall(r"\d+", raw["osl"])
    throughput_text = raw["throughput_tok_s"]
    ratio = re.match(r"([\d.]+)x the concurrency-1 throughput", throughput_text)
    return MeasuredRow(
        id=row_id,
        model=model,
        gpu=_gpu(raw["gpu"]),
        tp=int(raw["tp"]),
        fp8_weights=raw["weight_dtype"].startswith("fp8"),
        fp8_kv=raw["kv_dtype"].startswith("fp8"),
        load=load,
        batch=batch,
        rate_qps=rate,
        prompt_tokens=int(isl[0]) if isl else 0,
        output_tokens=int(osl[0]) if osl else 0,
        ttft_ms=_number(raw["ttft_ms"]),
        itl_ms=_number(raw["itl_ms"]),
        throughput=float(ratio.group(1)) if ratio else _number(throughput_text),
        throughput_is_ratio=ratio is not None,
        engine_note=raw["model"] + " " + notes,
        v0_engine="buildkite.com/vllm/performance-benchmark" in raw["source"]
        or "vLLM 0.6" in notes,
    )


def load_measured_rows(folder: Path) -> list[MeasuredRow]:
    """Every row of ``folder/measured_points.csv``."""
    with (folder / "measured_points.csv").open(newline="") as f:
        return [_row(raw) for raw in csv.DictReader(f)]


_QUEUE = (
    "closed-loop TTFT near and above saturation is queueing: at 70%+ utilisation the wait "
    "amplifies any gap in single-request prefill speed between NIM's engine and the modelled "
    "vLLM (+15% at one client) several-fold, and above saturation it is (clients - requests "
    "the engine runs at once) / throughput, which rests on NIM's batch and KV limits that the "
    "row does not state; the row's ITL and throughput are compared"
)
# Figures of modelled rows that are not compared, with the reason.
NOT_COMPARED: dict[tuple[str, str], str] = {
    (row_id, "ttft_ms"): _QUEUE
    for row_id in ("nim15_c25", "nim15_c50", "nim15_c100", "nim15_c150", "nim15_c200")
}


def unsupported_reason(row: MeasuredRow) -> str | None:
    """Why the simulator cannot replay ``row``; None when it can."""
    if "TensorRT-LLM" in row.engine_note:
        return (
            "TensorRT-LLM throughput at offline max load: another engine with its own kernels "
            "and scheduler (an upper bound on vLLM), not a vLLM setup"
        )
    if row.load == "offline-max":
        return "offline max-load throughput: the request count and arrival pattern are not given"
    return None


@dataclass(frozen=True)
class Replay:
    """What the simulator measured for a row, beside the row's own figures."""

    row: MeasuredRow
    ttft_ms: float | None
    itl_ms: float | None
    throughput: float | None

    def comparisons(self) -> list[tuple[str, float, float]]:
        """(measure, reference, model) for each figure the row has (``NOT_COMPARED`` left out)."""
        out = []
        for name, ref, got in (
            ("ttft_ms", self.row.ttft_ms, self.ttft_ms),
            ("itl_ms", self.row.itl_ms, self.itl_ms),
            ("throughput", self.row.throughput, self.throughput),
        ):
            if (self.row.id, name) in NOT_COMPARED:
                continue
            if ref is not None and got is not None:
                out.append((name, ref, got))
        return out


def _engine(row: MeasuredRow, max_len: int) -> VirtualEngine:
    args = [row.model, "--tensor-parallel-size", str(row.tp), "--max-model-len", str(max_len)]
    if row.fp8_weights and not row.model.lower().endswith(("-fp8", "-fp8-dynamic")):
        args += ["--quantization", "fp8"]
    if row.fp8_kv:
        args += ["--kv-cache-dtype", "fp8"]
    config = build_engine_config(VllmCommandLine.parse(None, args), gpu=row.gpu, num_gpus=row.tp)
    return VirtualEngine(config)


def _prompt(rng: random.Random, tokens: int) -> list[int]:
    # Random ids: no prefix-cache hits between requests (the benchmarks' prompts are distinct).
    return [rng.randrange(1, 100_000) for _ in range(tokens)]


def _offline_batch(row: MeasuredRow) -> Replay:
    engine = _engine(row, 4096)
    rng = random.Random(0)
    for _ in range(row.batch):
        engine.submit(_prompt(rng, row.prompt_tokens), row.output_tokens, at=0.0)
    engine.run_until_idle()
    e2e = max(r.finish for r in engine.records)
    return Replay(row, None, e2e / row.output_tokens * 1e3, None)


def _lognormal_lengths(rng: random.Random, mean: float, upper: int, n: int) -> list[int]:
    sigma = 0.9
    mu = math.log(mean) - sigma * sigma / 2
    return [min(upper, max(4, round(rng.lognormvariate(mu, sigma)))) for _ in range(n)]


def _poisson(row: MeasuredRow) -> Replay:
    assert row.rate_qps is not None
    engine = _engine(row, 4096)
    rng = random.Random(1)
    n = _SERVING_PROMPTS
    prompts = _lognormal_lengths(rng, row.prompt_tokens, _SHAREGPT_MAX_PROMPT, n)
    outputs = _lognormal_lengths(rng, row.output_tokens, _SHAREGPT_MAX_OUTPUT, n)
    at = 0.0
    for prompt, output in zip(prompts, outputs, strict=True):
        at += rng.expovariate(row.rate_qps)
        engine.submit(_prompt(rng, prompt), output, at=at)
    engine.run_until_idle()
    records = engine.records
    itls = [gap for r in records for gap in r.itls]
    return Replay(
        row,
        statistics.fmean(_ttft(r, row.v0_engine) for r in records) * 1e3,
        statistics.fmean(itls) * 1e3,
        None,
    )


def _ttft(record: RequestRecord, v0_engine: bool) -> float:
    """Time to the first token as the client saw it (V0: at the end of the next step)."""
    times = sorted(set(record.token_times))
    if v0_engine and len(times) > 1:
        return times[1] - record.arrival
    return record.ttft


def _steady(records: Sequence[RequestRecord], concurrency: int) -> list[RequestRecord]:
    """Requests sent after the initial burst that finished before the clients drained."""
    by_arrival = sorted(records, key=lambda r: r.arrival)
    last_sent = by_arrival[-1].arrival
    return [r for r in by_arrival[concurrency:] if r.finish <= last_sent] or list(records)


@dataclass(frozen=True)
class ClosedLoopResult:
    """Requests that ran at full concurrency, and the output tokens/s over their span."""

    steady: list[RequestRecord]
    throughput: float

    @property
    def ttft_ms(self) -> float:
        return statistics.fmean(r.ttft for r in self.steady) * 1e3

    @property
    def tpot_ms(self) -> float:
        return statistics.fmean(r.tpot for r in self.steady) * 1e3


def run_closed_loop_steady(
    engine: VirtualEngine,
    *,
    clients: int,
    prompt_tokens: int,
    output_tokens: int,
    rounds: int = 4,
    seed: int = 2,
    jitter_s: float = 0.01,
) -> ClosedLoopResult:
    """``clients`` closed-loop clients in steady state, as a benchmark measures them after its
    warm-up: their requests spread over one request's duration, not all sent in the same instant
    (a burst of identical requests would stay in lock-step: a deterministic engine has no jitter
    to undo it), and each client's next request leaves 0-``jitter_s`` after the previous one
    finished (the client's own parsing and scheduling; without it identical requests fall into
    lock-step patterns that a real server's timing noise breaks). Random prompts: no prefix-cache
    hits between requests."""
    rng = random.Random(seed)

    def prompt() -> list[int]:
        return _prompt(rng, prompt_tokens)

    alone = VirtualEngine(engine.core.config, cost=engine.core.cost)
    cycle = alone.run_requests([SimRequest(prompt(), output_tokens)])[0].e2e
    budget = clients * (rounds + 2)
    sent = 0

    def send(at: float) -> None:
        nonlocal sent
        engine.submit(prompt(), output_tokens, at=at)
        sent += 1

    def next_one(record: RequestRecord) -> None:
        if sent < budget:
            send(record.finish + rng.uniform(0.0, jitter_s))

    previous = engine.on_finish
    engine.on_finish = next_one
    try:
        for i in range(clients):
            send(engine.clock.now() + i * cycle / clients)
        engine.run_until_idle()
    finally:
        engine.on_finish = previous
    records = engine.records
    kept = _steady(records, clients)
    start = min(r.arrival for r in kept)
    end = max(r.finish for r in kept)
    # Output tokens/s over the steady span, counting the tokens produced inside it.
    produced = sum(sum(1 for t in r.token_times if start <= t <= end) for r in records)
    return ClosedLoopResult(kept, produced / (end - start) if end > start else 0.0)


def _closed_loop_run(row: MeasuredRow, clients: int) -> tuple[float, float, float]:
    total = row.prompt_tokens + row.output_tokens
    engine = _engine(row, max(4096, -(-total // 4096) * 4096))
    result = run_closed_loop_steady(
        engine, clients=clients, prompt_tokens=row.prompt_tokens, output_tokens=row.output_tokens
    )
    return result.ttft_ms, result.tpot_ms, result.throughput


def _closed_loop(row: MeasuredRow) -> Replay:
    ttft, itl, throughput = _closed_loop_run(row, row.batch)
    if row.throughput_is_ratio:
        _, _, single = _closed_loop_run(row, 1)
        return Replay(row, ttft, itl, throughput / single)
    return Replay(row, ttft, itl, throughput)


def simulate_measured_row(row: MeasuredRow) -> Replay:
    """The simulator's figures for a supported row (see ``unsupported_reason``)."""
    if row.load == "offline-batch":
        return _offline_batch(row)
    if row.load == "poisson":
        return _poisson(row)
    if row.load == "closed-loop":
        return _closed_loop(row)
    raise ValueError(f"{row.id}: {unsupported_reason(row) or 'unknown load'}")
