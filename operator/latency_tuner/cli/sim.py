"""``latency-tuner sim``: run a simulated vLLM server from a vLLM command line.

    latency-tuner sim [vllm serve] MODEL [--vllm-flags ...] [--sim-gpu GPU] [--sim-gpus N]
                      [--sim-seed S] [--sim-metrics-version current|legacy]
                      [--sim-spec-acceptance A] [--sim-startup-delay SECONDS]
    latency-tuner sim predict --help     (TTFT/ITL the model expects, without serving)

The vLLM part may be written ``serve MODEL ...``, ``vllm serve MODEL ...``, ``python -m
vllm.entrypoints.openai.api_server --model MODEL ...`` or just ``MODEL ...`` (the image's
entrypoint form); ``--host``/``--port``/``--api-key`` are read from it like vLLM does. On a
configuration vLLM would refuse, it logs the error as vLLM does and exits 1 at once.

Logs (stdout) imitate vLLM's and uvicorn's lines, including ``non-default args: {...}`` and
``Uvicorn running on http://HOST:PORT``. SIGTERM / SIGINT shut down gracefully (exit 0).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from latency_tuner.hardware import GPUS
from latency_tuner.perf.config import StartupError, build_engine_config
from latency_tuner.simulator.server import SimServer, UvicornAccessLogger, vllm_version
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine
from latency_tuner.vllm.metrics import MetricsVersion

__all__ = ["SimOptions", "main", "parse_command_line", "split_sim_options"]


def _help() -> str:
    defaults = SimOptions()
    return "\n".join(
        [
            "usage:",
            __doc__.split("\n\n")[1] if __doc__ else "",
            "",
            "A vLLM stand-in (no GPU): vLLM's OpenAI API, /metrics and start-up failures, with",
            "GPU timing from a first-principles cost model.",
            "",
            "options (every other flag is vLLM's, read as vLLM reads it):",
            f"  --sim-gpu GPU             GPU to simulate (default {defaults.gpu}); one of:",
            *textwrap.wrap(
                ", ".join(GPUS), 72, initial_indent=" " * 28, subsequent_indent=" " * 28
            ),
            f"  --sim-gpus N              GPUs in the pod (default {defaults.gpus})",
            f"  --sim-seed S              random seed of the workload noise (default "
            f"{defaults.seed})",
            "  --sim-metrics-version V   current or legacy (pre-0.11) metric names "
            f"(default {defaults.metrics_version.value})",
            "  --sim-spec-acceptance A   speculative-decoding acceptance rate (default: from "
            "the method and the prompts)",
            "  --sim-altered-share F     share of output tokens that differ from the 16-bit "
            "model's (default: from the weights and KV-cache dtype)",
            f"  --sim-startup-delay S     seconds before the server answers (default "
            f"{defaults.startup_delay:g})",
            "",
            "example:",
            "  latency-tuner sim vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 64 \\",
            "      --port 8000 --sim-gpu H100-SXM",
        ]
    )


_LAUNCHERS = {"vllm", "python", "python3"}


@dataclass
class SimOptions:
    gpu: str = "H100-SXM"
    gpus: int = 1
    seed: int = 0
    metrics_version: MetricsVersion = MetricsVersion.CURRENT
    spec_acceptance: float | None = None
    altered_share: float | None = None
    startup_delay: float = 0.0


class UsageError(ValueError):
    pass


def split_sim_options(argv: list[str]) -> tuple[SimOptions, list[str]]:
    """Take the ``--sim-*`` options out; the rest is the vLLM command line."""
    options = SimOptions()
    rest: list[str] = []
    setters: dict[str, Any] = {
        "--sim-gpu": lambda v: setattr(options, "gpu", v),
        "--sim-gpus": lambda v: setattr(options, "gpus", int(v)),
        "--sim-seed": lambda v: setattr(options, "seed", int(v)),
        "--sim-metrics-version": lambda v: setattr(options, "metrics_version", MetricsVersion(v)),
        "--sim-spec-acceptance": lambda v: setattr(options, "spec_acceptance", float(v)),
        "--sim-altered-share": lambda v: setattr(options, "altered_share", float(v)),
        "--sim-startup-delay": lambda v: setattr(options, "startup_delay", float(v)),
    }
    i = 0
    while i < len(argv):
        word = argv[i]
        name, eq, value = word.partition("=")
        if name.startswith("--sim-"):
            if name not in setters:
                raise UsageError(f"unknown simulator option {name} (known: {', '.join(setters)})")
            if not eq:
                if i + 1 >= len(argv):
                    raise UsageError(f"{name} needs a value")
                i += 1
                value = argv[i]
            try:
                setters[name](value)
            except ValueError as exc:
                raise UsageError(f"{name}: invalid value {value!r} ({exc})") from None
        else:
            rest.append(word)
        i += 1
    if options.gpus < 1:
        raise UsageError("--sim-gpus must be >= 1")
    return options, rest


def parse_command_line(rest: list[str]) -> VllmCommandLine:
    """The vLLM command line in any of the accepted shapes."""
    if not rest:
        raise UsageError("no vLLM command line: give at least the model")
    if rest[0] == "serve":
        return VllmCommandLine.parse(["vllm", "serve"], rest[1:])
    if rest[0] in _LAUNCHERS or rest[0].endswith("/vllm"):
        return VllmCommandLine.parse(rest, None)
    return VllmCommandLine.parse(None, rest)


def _setup_logging() -> None:
    pid = os.getpid()
    vllm = logging.Formatter(
        f"(APIServer pid={pid}) %(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s",
        datefmt="%m-%d %H:%M:%S",
    )
    uvicorn = logging.Formatter(f"(APIServer pid={pid}) %(levelname)s:     %(message)s")
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(vllm)
    for name in ("latency_tuner.simulator", "latency_tuner.simulator.server"):
        logging.getLogger(name).propagate = name != "latency_tuner.simulator.server"
    root = logging.getLogger("latency_tuner.simulator")
    root.handlers[:] = [out]
    root.setLevel(logging.INFO)
    root.propagate = False
    server = logging.getLogger("latency_tuner.simulator.server")
    server.propagate = True
    access = logging.StreamHandler(sys.stdout)
    access.setFormatter(uvicorn)
    for name in ("uvicorn", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers[:] = [access]
        lg.setLevel(logging.INFO)
        lg.propagate = False


def _non_default_args(cl: VllmCommandLine) -> dict[str, Any]:
    def typed(value: str | None, key: str) -> Any:
        if value is None:
            return not key.startswith("no-")
        for cast in (int, float):
            try:
                return cast(value)
            except ValueError:
                pass
        return value

    args: dict[str, Any] = {"model_tag": cl.model} if cl.model else {}
    for key, value in cl.flags():
        name = key.removeprefix("no-").replace("-", "_")
        args[name] = typed(value, key)
    if cl.model:
        args["model"] = cl.model
    return args


def main(argv: list[str]) -> int:
    if argv and argv[0] == "predict":
        from latency_tuner.simulator.predict import main_predict

        return main_predict(argv[1:])
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(_help())
        return 0
    _setup_logging()
    # Under the simulator's logger, so that its vLLM-style log format applies.
    log = logging.getLogger("latency_tuner.simulator.cli")
    uvicorn = logging.getLogger("uvicorn")
    try:
        options, rest = split_sim_options(argv)
        cl = parse_command_line(rest)
    except (UsageError, NotVllmError) as exc:
        print(f"latency-tuner sim: error: {exc}", file=sys.stderr)
        return 2
    version = vllm_version(options.metrics_version)
    log.info("vLLM API server version %s", version)
    log.info("non-default args: %s", _non_default_args(cl))
    try:
        config = build_engine_config(
            cl,
            gpu=options.gpu,
            num_gpus=options.gpus,
            seed=options.seed,
            spec_acceptance=options.spec_acceptance,
            altered_share=options.altered_share,
        )
    except (StartupError, ValueError) as exc:
        kind = "ValueError"  # what vLLM raises for a configuration it refuses
        log.error("EngineCore failed to start.")
        log.error("%s: %s", kind, exc)
        print(f"{kind}: {exc}", file=sys.stderr)
        print(
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}",
            file=sys.stderr,
        )
        return 1
    host = cl.get("host") or "0.0.0.0"
    try:
        port = int(cl.get("port") or 8000)
    except ValueError:
        print(f"latency-tuner sim: error: invalid --port {cl.get('port')!r}", file=sys.stderr)
        return 2
    tokens = config.num_gpu_blocks * config.block_size
    log.info("GPU KV cache size: %s tokens", f"{tokens:,}")
    log.info(
        "Maximum concurrency for %s tokens per request: %.2fx",
        f"{config.max_model_len:,}",
        tokens / config.max_model_len,
    )
    server = SimServer(
        config,
        metrics_version=options.metrics_version,
        seed=options.seed,
        api_key=cl.get("api-key"),
        model_path=cl.model,
        log_stats=cl.flag_enabled("disable-log-stats") is not True,
        served_names=(cl.get("served-model-name") or "").split() or None,
        prompt_tokens_details=cl.flag_enabled("enable-prompt-tokens-details") is True,
    )
    try:
        quiet = cl.flag_enabled("disable-uvicorn-access-log") is True
        return asyncio.run(_serve(server, host, port, options.startup_delay, log, uvicorn, quiet))
    except KeyboardInterrupt:
        return 0


async def _serve(
    server: SimServer,
    host: str,
    port: int,
    startup_delay: float,
    log: logging.Logger,
    uvicorn: logging.Logger,
    disable_access_log: bool = False,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if startup_delay > 0:  # vLLM loads weights and captures graphs before it listens
        try:
            await asyncio.wait_for(stop.wait(), startup_delay)
            return 0
        except TimeoutError:
            pass
    access_log = None if disable_access_log else logging.getLogger("uvicorn.access")
    runner = web.AppRunner(
        server.app,
        handler_cancellation=True,
        access_log_class=UvicornAccessLogger,
        access_log=access_log,
    )
    await runner.setup()
    site = web.TCPSite(runner, host or None, port)
    shown = "0.0.0.0" if host in ("", "0.0.0.0") else host
    log.info("Starting vLLM API server 0 on http://%s:%d", shown, port)
    uvicorn.info("Started server process [%d]", os.getpid())
    uvicorn.info("Waiting for application startup.")
    try:
        await site.start()
    except OSError as exc:
        uvicorn.error("[Errno %s] error while attempting to bind on address (%r, %d): %s",
                      exc.errno, host, port, exc.strerror)  # fmt: skip
        await runner.cleanup()
        return 1
    uvicorn.info("Application startup complete.")
    uvicorn.info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", shown, port)
    await stop.wait()
    uvicorn.info("Shutting down")
    uvicorn.info("Waiting for application shutdown.")
    await runner.cleanup()
    uvicorn.info("Application shutdown complete.")
    uvicorn.info("Finished server process [%d]", os.getpid())
    return 0
