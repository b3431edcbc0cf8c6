"""Transformer shapes of the models the simulator knows, and checkpoint-name parsing.

``resolve_model`` maps a served model name (Hugging Face id, local path, or pre-quantized
repository) to its architecture and the checkpoint's weight format. Pure: no I/O, no network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

__all__ = [
    "KNOWN_FAMILIES",
    "ModelShape",
    "UnknownModelError",
    "WeightDtype",
    "resolve_model",
]

WeightDtype = Literal["bf16", "fp8", "int4"]


class UnknownModelError(ValueError):
    """A model name the simulator has no shape for."""


@dataclass(frozen=True)
class ModelShape:
    """A dense decoder-only transformer (Llama-like: GQA attention, gated MLP)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    params_b: float  # billions, including embeddings
    max_model_len: int  # the context length vLLM derives from config.json
    weight_dtype: WeightDtype = "bf16"
    # The checkpoint's quantization_config.quant_method (None = unquantized).
    quant_method: str | None = None
    tied_embeddings: bool = False
    family: str = ""  # the known family this name resolved to, e.g. "Llama-3.1-8B"

    @property
    def linear_params_per_layer(self) -> int:
        """Weights of QKV, O, gate/up and down projections of one layer."""
        q = self.heads * self.head_dim
        kv = 2 * self.kv_heads * self.head_dim
        return self.hidden * (q + kv) + q * self.hidden + 3 * self.hidden * self.intermediate

    @property
    def lm_head_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def kv_bytes_per_token_per_layer_bf16(self) -> int:
        return 2 * self.kv_heads * self.head_dim * 2


_BASES: tuple[ModelShape, ...] = (
    ModelShape("Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, 8.03, 131072),
    ModelShape("Llama-3.1-70B", 80, 8192, 64, 8, 128, 28672, 128256, 70.55, 131072),
    ModelShape("Llama-3.3-70B", 80, 8192, 64, 8, 128, 28672, 128256, 70.55, 131072),
    ModelShape("Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, 8.03, 8192),
    ModelShape("Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, 70.55, 8192),
    ModelShape(
        "Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, 1.24, 131072, tied_embeddings=True
    ),
    ModelShape(
        "Llama-3.2-3B", 28, 3072, 24, 8, 128, 8192, 128256, 3.21, 131072, tied_embeddings=True
    ),
    ModelShape("Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, 7.62, 32768),
    ModelShape("Qwen2.5-32B", 64, 5120, 40, 8, 128, 27648, 152064, 32.76, 32768),
    ModelShape("Mistral-7B-v0.3", 32, 4096, 32, 8, 128, 14336, 32768, 7.25, 32768),
)
KNOWN_FAMILIES: tuple[str, ...] = tuple(m.name for m in _BASES)
_BY_KEY = {m.name.lower(): m for m in _BASES}


# Repository-name suffixes of pre-quantized checkpoints -> (weight dtype, quant_method in their
# config.json). Longest first so "-awq-int4" wins over "-int4".
_QUANT_SUFFIXES: tuple[tuple[str, WeightDtype, str], ...] = (
    ("-quantized.w4a16", "int4", "compressed-tensors"),
    ("-fp8-dynamic", "fp8", "compressed-tensors"),
    ("-gptq-int4", "int4", "gptq"),
    ("-awq-int4", "int4", "awq"),
    ("-w4a16", "int4", "compressed-tensors"),
    ("-gptq", "int4", "gptq"),
    ("-awq", "int4", "awq"),
    ("-int4", "int4", "gptq"),
    ("-fp8", "fp8", "fp8"),
)


def _strip_quant(key: str) -> tuple[str, WeightDtype, str | None]:
    for suffix, dtype, method in _QUANT_SUFFIXES:
        if key.endswith(suffix):
            return key.removesuffix(suffix), dtype, method
    return key, "bf16", None


def resolve_model(name: str) -> ModelShape:
    """The shape and checkpoint format behind a served model name.

    Accepts "meta-llama/Llama-3.1-8B-Instruct", "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8",
    "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "/models/Qwen2.5-7B-Instruct", ...
    """
    key = name.rstrip("/").rsplit("/", 1)[-1].lower()
    key, dtype, method = _strip_quant(key)
    key = key.removeprefix("meta-")  # "Meta-Llama-3.1-8B" is Llama-3.1-8B
    key = re.sub(r"-instruct(?=-|$)", "", key)  # Mistral-7B-Instruct-v0.3 -> mistral-7b-v0.3
    base = _BY_KEY.get(key)
    if base is None:
        families = ", ".join(KNOWN_FAMILIES)
        raise UnknownModelError(
            f"the simulator has no shape for model {name!r}; known families (with or without "
            f"-Instruct, an organisation prefix, or a -FP8/-FP8-dynamic/-AWQ/-GPTQ/-w4a16/-INT4 "
            f"suffix): {families}"
        )
    return replace(base, name=name, family=base.name, weight_dtype=dtype, quant_method=method)
