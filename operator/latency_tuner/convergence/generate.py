"""The seeded part of the harder suite: scenario families drawn at random, so the suite grows.

``generate(seed, count)`` draws ``count`` scenarios; family ``i % len(FAMILIES)`` for the
i-th, its parameters from ``random.Random(f"suite:{seed}:{i}")`` -- the same seed and count give
the same files, a new seed new ones. No family names a knob the operator "should" pick, and no
rule of the operator was written for them: each family is a situation (the load, the hardware,
the misconfiguration, the targets) with wide allowed spaces and traps:

- ``queue``: queueing behind a low max-num-seqs under open or closed load, with TTFT and ITL
  targets pulling apart (more concurrency helps TTFT, costs ITL), wide safe ranges;
- ``pcie-tp``: a model on PCIe GPUs with tensor parallelism allowed, where safe knobs suffice
  (TP over PCIe is the trap);
- ``lossy-trap``: FP8/4-bit checkpoints and FP8 KV allowed, the misconfiguration fixable by safe
  knobs (prefix caching off, a small batch budget, low memory utilisation);
- ``tp-budget``: a GPU budget with TP allowed where TP1 plus safe knobs suffices;
- ``multi-step``: two or three problems at once (eager mode, prefix caching off, a low
  max-num-seqs, a small batch budget): the optimum is several changes away;
- ``interference``: long prompts interleaved with decodes; a larger batch budget helps TTFT and
  hurts ITL;
- ``bursty``: on/off bursts (open loop);
- ``drift``: an open-loop rate that grows 1.4-2.2x during the run;
- ``kv-pressure``: long contexts on little memory: a 4-bit checkpoint, FP8 KV or more memory;
- ``impossible``: a target no allowed configuration can meet on this hardware (ITL below what
  the weight reads allow, TTFT below a long prefill's compute).

Pure: returns mappings; the CLI writes them as YAML.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from latency_tuner.scenario import latency_target, vllm_deployment

Family = Callable[[random.Random], dict[str, Any]]

_MODELS = {  # served name, (FP8 checkpoint, 4-bit checkpoint)
    "8b": ("meta-llama/Llama-3.1-8B-Instruct",
           ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8",
            "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4")),
    "32b": ("Qwen/Qwen2.5-32B-Instruct",
            ("Qwen/Qwen2.5-32B-Instruct-FP8", "Qwen/Qwen2.5-32B-Instruct-AWQ")),
    "70b": ("meta-llama/Llama-3.1-70B-Instruct",
            ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
             "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4")),
    "7b": ("Qwen/Qwen2.5-7B-Instruct",
           ("Qwen/Qwen2.5-7B-Instruct-FP8", "Qwen/Qwen2.5-7B-Instruct-AWQ")),
    "mistral": ("mistralai/Mistral-7B-Instruct-v0.3",
                ("neuralmagic/Mistral-7B-Instruct-v0.3-FP8",
                 "solidrust/Mistral-7B-Instruct-v0.3-AWQ")),
}  # fmt: skip
_SMALL = ("8b", "7b", "mistral")
_EVAL = {"window": "15s", "settle": "10s"}


def _ms(value: float) -> str:
    return f"{round(value)}ms"


def _objectives(**targets: tuple[int, float]) -> dict[str, Any]:
    return {k: {"percentile": p, "threshold": _ms(v)} for k, (p, v) in targets.items()}


def _scenario(
    name: str,
    description: str,
    tags: list[str],
    *,
    gpu: str,
    gpus: int,
    gpus_per_node: int | None = None,
    model: str,
    args: list[str],
    workload: dict[str, Any],
    objectives: dict[str, Any],
    knobs: dict[str, Any],
    min_requests: int,
    feasible: bool = True,
) -> dict[str, Any]:
    base = {
        "maxNumSeqs": None,
        "maxNumBatchedTokens": None,
        "gpuMemoryUtilization": None,
        "prefixCaching": False,
        "chunkedPrefill": False,
    }
    return {
        "name": name,
        "description": description,
        "tags": ["generated", *tags],
        "hardware": {"gpu": gpu, "gpus": gpus_per_node or gpus},
        "workload": workload,
        "deployment": vllm_deployment("llama", model, args, gpus=gpus),
        "latencyTarget": latency_target(
            "llama",
            objectives,
            knobs={**base, **knobs},
            evaluation={**_EVAL, "minRequests": min_requests},
        ),
        "expect": {"feasible": feasible},
    }


def _open(rng: random.Random, rate: float, prompt: int, output: int) -> dict[str, Any]:
    return {"arrival": "poisson", "rate": round(rate, 1), "promptTokens": prompt,
            "outputTokens": output, "spread": round(rng.uniform(0.1, 0.5), 2)}  # fmt: skip


def _variants(key: str, rng: random.Random, both: bool = True) -> dict[str, Any]:
    fp8, int4 = _MODELS[key][1]
    picks = [("fp8", fp8), ("awq", int4)] if both else [rng.choice([("fp8", fp8), ("awq", int4)])]
    return {"variants": [{"name": n, "model": m} for n, m in picks]}


def queue(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(_SMALL)
    gpu = rng.choice(["H100-SXM", "H200", "A100-80G", "L40S"])
    closed = rng.random() < 0.5
    prompt, output = rng.choice([(300, 150), (600, 200), (1200, 120)])
    start = rng.choice([8, 16])
    load = (
        {"arrival": "closed", "users": rng.choice([48, 64, 96]), "promptTokens": prompt,
         "outputTokens": output, "spread": 0.3}
        if closed
        else _open(rng, rng.uniform(16, 26), prompt, output)  # > start slots x 1 / e2e
    )  # fmt: skip
    itl = rng.choice([40, 50, 60]) * (1.6 if gpu == "L40S" else 1.0)
    return _scenario(
        "queue", f"{'Closed' if closed else 'Open'}-loop chat queueing behind max-num-seqs "
        f"{start}; TTFT and ITL targets pull apart.", ["queueing", "mixed-objectives"],
        gpu=gpu, gpus=1, model=_MODELS[key][0], args=["--max-num-seqs", str(start)],
        workload=load,
        objectives=_objectives(ttft=(90, rng.choice([500, 800, 1200])), itl=(90, itl)),
        knobs={"maxNumSeqs": {"min": start, "max": rng.choice([128, 256])},
               "maxNumBatchedTokens": {"min": 1024, "max": 8192}},
        min_requests=40,
    )  # fmt: skip


def pcie_tp(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(["32b", "8b"])
    gpu = rng.choice(["L40S", "A100-80G-PCIe", "H100-PCIe"])
    if key == "32b" and gpu == "L40S":
        key = "8b"
    start = 16
    return _scenario(
        "pcie-tp", f"{key} on {gpu} over PCIe with TP allowed up to 4; the queue is the "
        "problem.", ["trap", "tp-over-pcie", "queueing"],
        gpu=gpu, gpus=1, gpus_per_node=4, model=_MODELS[key][0],
        args=["--max-num-seqs", str(start)],
        workload=_open(rng, rng.uniform(3, 8), rng.choice([500, 1000]), rng.choice([100, 200])),
        objectives=_objectives(ttft=(90, rng.choice([800, 1500])),
                               itl=(90, rng.choice([60, 80, 100]))),
        knobs={"maxNumSeqs": {"min": 16, "max": 128}, "tensorParallel": {"maxSize": 4},
               "gpuMemoryUtilization": {"max": 0.95}},
        min_requests=30,
    )  # fmt: skip


def lossy_trap(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(["8b", "7b", "32b"])
    gpu = rng.choice(["H100-SXM", "H200"])
    groups = rng.choice([2, 4])
    shared = rng.choice([2000, 3000])
    load = {"arrival": "poisson", "rate": round(rng.uniform(3, 8), 1),
            "promptTokens": shared + 300, "outputTokens": rng.choice([60, 120]),
            "spread": 0.05, "sharedPrefixTokens": shared, "prefixGroups": groups}  # fmt: skip
    return _scenario(
        "lossy-trap", "RAG with long shared prefixes and prefix caching off; FP8 and 4-bit "
        "checkpoints and FP8 KV are allowed but not needed.", ["trap", "lossy-unneeded", "rag"],
        gpu=gpu, gpus=1, model=_MODELS[key][0],
        args=["--no-enable-prefix-caching", "--max-num-batched-tokens", "2048"],
        workload=load, objectives=_objectives(ttft=(90, rng.choice([250, 400]))),
        knobs={"prefixCaching": True, "quantization": _variants(key, rng),
               "kvCacheDtype": ["fp8"], "maxNumBatchedTokens": {"min": 2048, "max": 8192}},
        min_requests=30,
    )  # fmt: skip


def tp_budget(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(["8b", "32b"])
    gpu = rng.choice(["H100-SXM", "H200", "A100-80G"])
    return _scenario(
        "tp-budget", f"{key} on one {gpu} of a 4-GPU node, TP allowed; max-num-seqs and the "
        "memory share are what is wrong.", ["trap", "tp-not-needed"],
        gpu=gpu, gpus=1, gpus_per_node=4, model=_MODELS[key][0],
        args=["--max-num-seqs", "16", "--gpu-memory-utilization", "0.85",
              *(["--max-model-len", "8192"] if key == "32b" else [])],
        workload={"arrival": "closed", "users": rng.choice([48, 64]), "promptTokens":
                  rng.choice([400, 800]), "outputTokens": rng.choice([150, 250]), "spread": 0.3},
        objectives=_objectives(ttft=(90, rng.choice([600, 1000])),
                               itl=(90, rng.choice([50, 70]))),
        knobs={"maxNumSeqs": {"min": 16, "max": 64}, "gpuMemoryUtilization": {"max": 0.95},
               "tensorParallel": {"maxSize": 4}},
        min_requests=40,
    )  # fmt: skip


def multi_step(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(_SMALL)
    gpu = rng.choice(["H100-SXM", "A100-80G", "L40S"])
    shared = 1500
    load = {"arrival": "poisson", "rate": round(rng.uniform(6, 12), 1),
            "promptTokens": shared + 400, "outputTokens": rng.choice([80, 150]), "spread": 0.1,
            "sharedPrefixTokens": shared, "prefixGroups": 2}  # fmt: skip
    return _scenario(
        "multi-step", "Eager mode, prefix caching off and max-num-seqs 16 at once: the best "
        "configuration is several changes away.", ["multi-step", "misconfigured"],
        gpu=gpu, gpus=1, model=_MODELS[key][0],
        args=["--enforce-eager", "--no-enable-prefix-caching", "--max-num-seqs", "16"],
        workload=load,
        objectives=_objectives(ttft=(90, rng.choice([300, 500])),
                               e2e=(90, rng.choice([3000, 5000]))),
        knobs={"prefixCaching": True, "maxNumSeqs": {"min": 16, "max": 128}},
        min_requests=40,
    )  # fmt: skip


def interference(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(_SMALL)
    gpu = rng.choice(["H100-SXM", "H200", "A100-80G"])
    load = _open(rng, rng.uniform(4, 9), rng.choice([2500, 4000]), rng.choice([150, 250]))
    load["spread"] = 0.6
    return _scenario(
        "interference", "Long prompts interleaved with decodes: a larger batch budget helps "
        "TTFT and hurts ITL.", ["mixed-objectives", "opposing", "prefill"],
        gpu=gpu, gpus=1, model=_MODELS[key][0], args=["--max-num-batched-tokens", "16384"],
        workload=load,
        objectives=_objectives(ttft=(90, rng.choice([800, 1200])),
                               itl=(99, rng.choice([50, 75]))),
        knobs={"maxNumBatchedTokens": {"min": 512, "max": 16384},
               "maxNumSeqs": {"min": 64, "max": 256}},
        min_requests=30,
    )  # fmt: skip


def bursty(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(["8b", "32b", "7b"])
    gpu = rng.choice(["H100-SXM", "H200"])
    load = {"arrival": "bursty", "rate": round(rng.uniform(5, 10), 1),
            "burstFactor": rng.choice([2.0, 3.0]), "burstSeconds": 5, "burstPeriodSeconds": 20,
            "promptTokens": rng.choice([400, 800]), "outputTokens": rng.choice([100, 200]),
            "spread": 0.3}  # fmt: skip
    return _scenario(
        "bursty", "On/off bursts behind a low max-num-seqs, FP8 KV allowed.",
        ["bursty", "queueing"], gpu=gpu, gpus=1, model=_MODELS[key][0],
        args=["--max-num-seqs", "16"], workload=load,
        objectives=_objectives(ttft=(90, rng.choice([500, 1000])),
                               itl=(90, rng.choice([50, 60]))),
        knobs={"maxNumSeqs": {"min": 16, "max": 256}, "kvCacheDtype": ["fp8"],
               "maxNumBatchedTokens": {"min": 2048, "max": 8192}},
        min_requests=40,
    )  # fmt: skip


def drift(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(_SMALL)
    gpu = rng.choice(["H100-SXM", "A100-80G", "L40S"])
    load = _open(rng, rng.uniform(3, 6), rng.choice([500, 1000]), rng.choice([120, 200]))
    load |= {"drift": round(rng.uniform(1.4, 2.2), 2), "driftSeconds": rng.choice([300, 600])}
    return _scenario(
        "drift", "Chat whose rate grows during the run, behind max-num-seqs 16.",
        ["drift", "queueing"], gpu=gpu, gpus=1, model=_MODELS[key][0],
        args=["--max-num-seqs", "16"], workload=load,
        objectives=_objectives(ttft=(90, rng.choice([600, 1000])),
                               itl=(90, 60 if gpu != "L40S" else 90)),
        knobs={"maxNumSeqs": {"min": 16, "max": 256}, "gpuMemoryUtilization": {"max": 0.95},
               "maxNumBatchedTokens": {"min": 2048, "max": 8192}},
        min_requests=30,
    )  # fmt: skip


def kv_pressure(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(["32b", "70b"])
    gpu = "H100-SXM" if key == "32b" else rng.choice(["H100-SXM", "H200"])
    if key == "70b":
        gpu = "H200"  # two H100s hold 70B's weights but too little KV for one 16k context
    gpus = 1 if key == "32b" else 2
    return _scenario(
        "kv-pressure", "Long contexts on little KV memory: preemptions and queueing.",
        ["kv-pressure", "long-context"], gpu=gpu, gpus=gpus, gpus_per_node=gpus,
        model=_MODELS[key][0],
        args=["--gpu-memory-utilization", "0.9", "--max-model-len", "16384",
              *(["--tensor-parallel-size", "2"] if gpus == 2 else [])],
        workload={"arrival": "closed", "users": rng.choice([16, 24]), "promptTokens":
                  rng.choice([6000, 9000]), "outputTokens": rng.choice([200, 400]),
                  "spread": 0.2},
        objectives=_objectives(ttft=(90, rng.choice([3000, 5000])),
                               itl=(90, rng.choice([60, 80]))),
        knobs={"gpuMemoryUtilization": {"max": 0.95}, "kvCacheDtype": ["fp8"],
               "quantization": _variants(key, rng, both=False),
               "maxNumSeqs": {"min": 16, "max": 32}},
        min_requests=20,
    )  # fmt: skip


def impossible(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(["32b", "8b", "70b"])
    gpu = rng.choice(["A100-80G", "H100-SXM"] if key == "32b" else ["A100-80G", "L40S", "H100-SXM"])
    if key == "70b":
        gpu, gpus = "H100-SXM", 4
    else:
        gpus = 1
    # Below what reading the weights once per token allows, whatever the knobs.
    itl = {"8b": 4, "32b": 9, "70b": 6}[key]
    return _scenario(
        "impossible", f"An ITL target below what {key} on {gpu} can reach with any allowed "
        "configuration.", ["infeasible"], gpu=gpu, gpus=gpus, gpus_per_node=gpus,
        model=_MODELS[key][0],
        args=["--max-num-seqs", "32", *(["--tensor-parallel-size", "4"] if gpus == 4 else [])],
        workload=_open(rng, rng.uniform(1, 4), rng.choice([300, 800]), rng.choice([100, 200])),
        objectives=_objectives(itl=(90, itl), ttft=(90, 2000)),
        knobs={"maxNumSeqs": {"min": 16, "max": 256}, "kvCacheDtype": ["fp8"],
               "maxNumBatchedTokens": {"min": 1024, "max": 8192}},
        min_requests=20, feasible=False,
    )  # fmt: skip


FAMILIES: tuple[Family, ...] = (
    queue, pcie_tp, lossy_trap, tp_budget, multi_step, interference, bursty, drift, kv_pressure,
    impossible,
)  # fmt: skip


def generate(seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` scenarios, named ``g<seed>-<nn>-<family>``."""
    out = []
    for i in range(count):
        family = FAMILIES[i % len(FAMILIES)]
        data = family(random.Random(f"suite:{seed}:{i}"))
        data["name"] = f"g{seed}-{i:02d}-{data['name']}"
        out.append(data)
    return out
