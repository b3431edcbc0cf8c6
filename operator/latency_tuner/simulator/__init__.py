"""A vLLM stand-in: a V1-style scheduler timed by the performance model (``latency_tuner.perf``:
command-line validation, first-principles step costs) and an OpenAI-compatible HTTP server with
vLLM's metrics.

It exists for demos, tests, e2e runs and virtual-time benchmarks; a client should not be able to
tell it from vLLM at the API and metrics level.

It must never import anything of the operator (``latency_tuner.api``, ``core``, ``adapters``,
``handlers``): it may only use what we know of vLLM (``latency_tuner.vllm``,
``latency_tuner.perf``).
"""
