"""What vLLM's argument parser says about its flags: which are booleans, which take several
values, and which short aliases stand for which long name.

Gathered from ``vllm/engine/arg_utils.py``, ``vllm/entrypoints/openai/cli_args.py`` and
``vllm/utils/argparse_utils.py`` (0.6 to current). Only the shape of each flag lives here (does
it take a value?), never its default: defaults are in ``latency_tuner.vllm.defaults``. Pure data
and two tiny functions; private to ``latency_tuner.vllm``.
"""

from __future__ import annotations

import re

# Flags that take no value (``--x`` / ``--no-x``; BooleanOptionalAction or store_true).
BOOLEAN_FLAGS: frozenset[str] = frozenset(
    {
        # engine: model, load, cache, scheduler, parallel
        "enable-prefix-caching",
        "enable-chunked-prefill",
        "enforce-eager",
        "trust-remote-code",
        "skip-tokenizer-init",
        "enable-prompt-embeds",
        "disable-sliding-window",
        "disable-cascade-attn",
        "disable-async-output-proc",
        "enable-sleep-mode",
        "use-tqdm-on-load",
        "calculate-kv-scales",
        "kv-sharing-fast-prefill",
        "enable-expert-parallel",
        "enable-eplb",
        "enable-dbo",
        "data-parallel-hybrid-lb",
        "data-parallel-external-lb",
        "disable-nccl-for-dp-synchronization",
        "ray-workers-use-nsight",
        "disable-custom-all-reduce",
        "enable-multimodal-encoder-data-parallel",
        "enable-lora",
        "enable-lora-bias",
        "fully-sharded-loras",
        "enable-prompt-adapter",
        "enable-mm-embeds",
        "interleave-mm-strings",
        "skip-mm-profiling",
        "disable-mm-preprocessor-cache",
        "disable-chunked-mm-input",
        "disable-hybrid-kv-cache-manager",
        "async-scheduling",
        "multi-step-stream-outputs",
        "speculative-disable-mqa-scorer",
        "disable-logprobs-during-spec-decoding",
        "enable-reasoning",
        "guided-decoding-disable-fallback",
        "guided-decoding-disable-any-whitespace",
        "guided-decoding-disable-additional-properties",
        "disable-log-stats",
        "aggregate-engine-logging",
        "enable-log-requests",
        "disable-log-requests",
        # OpenAI-compatible frontend
        "headless",
        "grpc",
        "disable-uvicorn-access-log",
        "allow-credentials",
        "enable-ssl-refresh",
        "enable-request-id-headers",
        "disable-fastapi-docs",
        "enable-offline-docs",
        "disable-frontend-multiprocessing",
        "enable-auto-tool-choice",
        "exclude-tools-when-tool-choice-none",
        "return-tokens-as-token-ids",
        "trust-request-chat-template",
        "enable-prompt-tokens-details",
        "enable-per-request-metrics",
        "enable-server-load-tracking",
        "enable-force-include-usage",
        "enable-tokenizer-info-endpoint",
        "enable-log-outputs",
        "enable-log-deltas",
        "log-error-stack",
        "tokens-only",
    }
)

# Flags that take one or more values (argparse nargs="+").
MULTI_VALUE_FLAGS: frozenset[str] = frozenset(
    {
        "served-model-name",
        "lora-modules",
        "prompt-adapters",
        "api-key",
        "cuda-graph-sizes",
        "cudagraph-capture-sizes",
        "ignore-patterns",
        "allowed-media-domains",
    }
)

# Value-taking flags only vLLM's server has: with a model-like first positional, one of these
# (or a vLLM boolean or multi-value flag) tells a bare-args container runs vLLM's entrypoint.
# Generic words (--port, --host, --config) are left out: every server has them.
VLLM_VALUE_FLAGS: frozenset[str] = frozenset(
    {
        "model",
        "tokenizer",
        "max-model-len",
        "max-num-seqs",
        "max-num-batched-tokens",
        "gpu-memory-utilization",
        "tensor-parallel-size",
        "pipeline-parallel-size",
        "data-parallel-size",
        "quantization",
        "kv-cache-dtype",
        "dtype",
        "speculative-config",
        "block-size",
        "swap-space",
        "cpu-offload-gb",
        "max-num-partial-prefills",
        "long-prefill-token-threshold",
        "compilation-config",
        "optimization-level",
        "chat-template",
        "tool-call-parser",
        "reasoning-parser",
        "download-dir",
        "load-format",
        "revision",
        "seed",
        "max-logprobs",
        "limit-mm-per-prompt",
        "distributed-executor-backend",
        "scheduling-policy",
        "performance-mode",
    }
)


def is_vllm_flag(key: str) -> bool:
    """A canonical flag name only vLLM's server knows (see ``VLLM_VALUE_FLAGS``)."""
    head = key.partition(".")[0]
    return head in VLLM_VALUE_FLAGS or head in BOOLEAN_FLAGS or head in MULTI_VALUE_FLAGS


# Short aliases (vLLM registers these with a single dash).
SHORT_ALIASES: dict[str, str] = {
    "tp": "tensor-parallel-size",
    "pp": "pipeline-parallel-size",
    "dp": "data-parallel-size",
    "dcp": "decode-context-parallel-size",
    "dpn": "data-parallel-rank",
    "dpr": "data-parallel-start-rank",
    "dpl": "data-parallel-size-local",
    "dpa": "data-parallel-address",
    "dpp": "data-parallel-rpc-port",
    "dpb": "data-parallel-backend",
    "asc": "api-server-count",
    "q": "quantization",
    "spec-draft-tp": "speculative-draft-tensor-parallel-size",
    # "-O" is special-cased in args.py: "-O3"/"-O 3" is an optimisation level, "-O {json}" a
    # compilation config.
}

_BOOL_LITERALS = {
    "true": True,
    "1": True,
    "yes": True,
    "on": True,
    "false": False,
    "0": False,
    "no": False,
    "off": False,
}

_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")


def canonical(name: str) -> str:
    """``--max_num_seqs`` -> ``max-num-seqs``; ``-tp`` -> ``tensor-parallel-size``.

    Like vLLM's FlexibleArgumentParser, underscores become dashes only before the first dot
    (``--compilation-config.cudagraph_mode`` keeps its JSON key).
    """
    if name.startswith("-") and not name.startswith("--"):
        return SHORT_ALIASES.get(name[1:], name[1:])
    head, dot, tail = name.removeprefix("--").partition(".")
    return head.replace("_", "-") + dot + tail


def key_for(name: str) -> str:
    """The canonical key a caller means by ``name``: ``max_num_seqs``, ``--tp``, ``-tp``, ``O``."""
    bare = name.lstrip("-")
    if bare == "O":
        return "optimization-level"
    if bare in SHORT_ALIASES:
        return SHORT_ALIASES[bare]
    return canonical("--" + bare)


def bool_literal(text: str) -> bool | None:
    """``"true"``/``"False"``/``"1"`` -> bool; anything else -> None."""
    return _BOOL_LITERALS.get(text.strip().lower())


def is_number(text: str) -> bool:
    """A number, possibly negative: argparse lets ``-1`` be a value, not an option."""
    return _NUMBER.fullmatch(text) is not None
