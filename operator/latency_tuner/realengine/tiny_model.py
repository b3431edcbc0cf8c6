"""Builds a tiny Llama-architecture model directory that real vLLM serves, from local data only.

Runs inside the vLLM venv (it needs ``torch``, ``transformers`` and ``tokenizers``, imported
inside functions so the operator's venv can type-check this file without them):

    <vllm-venv>/bin/python -m latency_tuner.realengine.tiny_model OUT_DIR

(``latency-tuner tiny-model OUT_DIR`` does exactly that with the venv ``setup-vllm.sh`` made.)

What it writes: random weights (seeded, so two builds are identical) saved with
``transformers``; a byte-level BPE tokenizer trained with ``tokenizers`` on text generated here
from the bench's prompt vocabulary (``latency_tuner.loadgen.prompts``), so every bench word is one
token and ``latency-tuner bench``'s "1 token = 1 word" holds on the real engine too; a ChatML
chat template. Nothing is downloaded.

Size (``ModelSize``): chosen so that on 2 CPU cores a 1,000-token prefill costs a sizeable
fraction of a second while one decode step costs tens of milliseconds: then queueing (requests
waiting behind ``--max-num-seqs``), prefix caching (skipping a long shared prefill) and chunked
prefill (a long prefill stalling decodes) move TTFT and ITL by visible amounts. The numbers in
the docstring of ``DEFAULT_SIZE`` were measured with ``latency-tuner bench`` against it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from latency_tuner.loadgen.prompts import PromptFactory

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# ChatML, as many chat models write it; vLLM renders it for /v1/chat/completions.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
STAMP = "tiny-model.json"


@dataclass(frozen=True)
class ModelSize:
    """The Llama shape. ``vocab_size`` is the tokenizer's target (special tokens included)."""

    hidden_size: int = 512
    intermediate_size: int = 1536
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    max_position_embeddings: int = 4096
    vocab_size: int = 2048
    seed: int = 0


DEFAULT_SIZE = ModelSize()


def corpus(lines: int = 4000, words_per_line: int = 64) -> list[str]:
    """Training text: lines of the bench's prompt words plus a few chat turns. Deterministic."""
    text = [
        PromptFactory(prompt_tokens=words_per_line, seed=7).prompt(i).text for i in range(lines)
    ]
    text += [f"<|im_start|>user\n{t}<|im_end|>\n<|im_start|>assistant\n" for t in text[:200]]
    return text


def build(out: Path, size: ModelSize = DEFAULT_SIZE) -> Path:
    """Writes the model directory ``out`` (config, safetensors, tokenizer); returns it.

    A directory already built with the same ``size`` is left as it is.
    """
    stamp = out / STAMP
    if stamp.exists() and json.loads(stamp.read_text()) == asdict(size):
        return out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(size.vocab_size)
    tokenizer.save_pretrained(str(out))
    model = _random_model(size, len(tokenizer), tokenizer)
    model.save_pretrained(str(out), safe_serialization=True)
    stamp.write_text(json.dumps(asdict(size), sort_keys=True))
    return out


def _train_tokenizer(vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _random_model(size: ModelSize, vocab: int, tokenizer: Any) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(size.seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=size.hidden_size,
        intermediate_size=size.intermediate_size,
        num_hidden_layers=size.num_hidden_layers,
        num_attention_heads=size.num_attention_heads,
        num_key_value_heads=size.num_key_value_heads,
        max_position_embeddings=size.max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.eval()
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tiny_model", description="Build the tiny Llama model directory real vLLM serves."
    )
    parser.add_argument("out", type=Path, help="model directory to write")
    for field, default in asdict(DEFAULT_SIZE).items():
        parser.add_argument(f"--{field.replace('_', '-')}", type=int, default=default)
    args = parser.parse_args(argv)
    size = ModelSize(**{f: getattr(args, f) for f in asdict(DEFAULT_SIZE)})
    print(build(args.out, size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
