"""Parses vLLM server argument lists with real vLLM's own parser; runs inside the vLLM venv.

    <vllm-venv>/bin/python -m latency_tuner.realengine.argprobe < cases.json

stdin: a JSON list of ``{"launcher": "serve" | "api_server", "argv": [...]}``; ``argv`` is what
follows ``vllm serve`` (model first, positional) or ``python -m
vllm.entrypoints.openai.api_server`` (``--model M`` among the flags). Each is parsed the way
that launcher parses it: ``serve`` by the ``serve`` subcommand's parser that vLLM's CLI adds to a
``FlexibleArgumentParser`` (positional ``model_tag`` becomes ``model``), ``api_server`` by
``make_arg_parser(FlexibleArgumentParser())``; then ``validate_parsed_serve_args`` and
``EngineArgs.from_cli_args`` run, as the server does before it builds an engine.

stdout: a JSON list, one ``{"ok": true, "values": {field: value}}`` or ``{"ok": false,
"error": "..."}`` per case, ``values`` being the EngineArgs fields the operator tunes. No engine
is built, no model is read, no port is opened.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

FIELDS = (
    "model",
    "served_model_name",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "enforce_eager",
    "cpu_offload_gb",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "quantization",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "speculative_config",
    "max_model_len",
    "optimization_level",
    "async_scheduling",
    "performance_mode",
)


def _parser(launcher: str) -> Any:
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if launcher == "api_server":
        return make_arg_parser(FlexibleArgumentParser())
    top = FlexibleArgumentParser(prog="vllm")
    subparsers = top.add_subparsers(dest="subparser")
    ServeSubcommand().subparser_init(subparsers)
    return top


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(getattr(value, "value", value))


def parse(launcher: str, argv: list[str]) -> dict[str, Any]:
    """One case: ``{"ok": True, "values": {...}}`` or ``{"ok": False, "error": "..."}``."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

    parser = _parser(launcher)
    words = ["serve", *argv] if launcher == "serve" else list(argv)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            namespace = parser.parse_args(words)
        if getattr(namespace, "model_tag", None) is not None:
            namespace.model = namespace.model_tag
        validate_parsed_serve_args(namespace)
        engine_args = EngineArgs.from_cli_args(namespace)
    except SystemExit:
        return {"ok": False, "error": errors.getvalue().strip().splitlines()[-1:]}
    except Exception as exc:  # vLLM's own validation: ValueError, TypeError, pydantic errors
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    values = {f: _jsonable(getattr(engine_args, f, None)) for f in FIELDS}
    return {"ok": True, "values": values}


def main() -> int:
    cases = json.load(sys.stdin)
    results = [parse(c["launcher"], c["argv"]) for c in cases]
    json.dump(results, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
