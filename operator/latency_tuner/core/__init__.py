"""The pure decision core: observation values, diagnosis, knobs, a performance model calibrated
on each window (``model``), planning, verdict, rollout phases and PromQL templates.

Everything here is a function of its arguments. It must never do I/O, read a clock (time
arrives as ``now``), or import kopf, kubernetes, httpx, aiohttp or a Prometheus client; it
imports only the standard library, pydantic, ``latency_tuner.api``, ``latency_tuner.vllm`` and the
pure shared packages ``latency_tuner.hardware`` (GPU table) and ``latency_tuner.perf`` (step
costs).
"""
