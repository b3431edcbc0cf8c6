"""Recognises the program a container (or one command of its shell script) starts.

Answers one question about a list of words: is this vLLM's OpenAI-compatible server (and how
many words name the program: ``vllm serve`` is two, ``python3 -m vllm.entrypoints.openai.
api_server`` three), a shell with an inline script, or something else (then: what, in words a
user recognises, such as "text-generation-launcher (Hugging Face TGI)")? Pure; it never looks
at the file system or the image, so a program hidden in a script file cannot be seen.
Private to ``latency_tuner.vllm.args``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
# Words that may come before the program in a command without changing what runs.
_PREFIX_WORDS = frozenset({"exec", "nohup", "time", "then", "do", "else", "{", "!", "command"})

_VLLM_MODULES = {
    "vllm.entrypoints.openai.api_server": 0,
    "vllm.entrypoints.api_server": 0,
    # the module behind the ``vllm`` console script: needs the ``serve`` subcommand
    "vllm.entrypoints.cli.main": 1,
}

_OTHER_PROGRAMS = {
    "text-generation-launcher": "text-generation-launcher (Hugging Face TGI)",
    "text-generation-server": "text-generation-server (Hugging Face TGI)",
    "trtllm-serve": "trtllm-serve (TensorRT-LLM)",
    "tritonserver": "tritonserver (NVIDIA Triton)",
    "ollama": "ollama (Ollama)",
    "llama-server": "llama-server (llama.cpp)",
    "lmdeploy": "lmdeploy (LMDeploy)",
    "sglang": "sglang (SGLang)",
    "uvicorn": "uvicorn (a Python web app)",
    "gunicorn": "gunicorn (a Python web app)",
    "fastapi": "fastapi (a Python web app)",
    "streamlit": "streamlit (a Python web app)",
    "node": "node (a JavaScript program)",
}

_OTHER_MODULES = {
    "sglang": "python -m sglang.launch_server (SGLang)",
    "text_generation_server": "text_generation_server (Hugging Face TGI)",
    "huggingfaceserver": "python -m huggingfaceserver (KServe's Hugging Face server)",
    "tensorrt_llm": "TensorRT-LLM",
    "lmdeploy": "lmdeploy (LMDeploy)",
    "llama_cpp": "llama-cpp-python's server",
    "uvicorn": "uvicorn (a Python web app)",
    "gunicorn": "gunicorn (a Python web app)",
}


@dataclass(frozen=True)
class Launch:
    """What a list of words starts.

    ``kind``: "vllm" (words ``[skip, skip + length)`` name vLLM's server, arguments follow),
    "shell" (the inline script is word ``script``), or "other" (``what`` says what runs;
    ``known`` is False when the first word is merely not recognised).
    """

    kind: Literal["vllm", "shell", "other"]
    what: str
    skip: int = 0
    length: int = 0
    script: int = -1
    known: bool = True  # False: an unrecognised first word (maybe a model, maybe a program)


def identify(words: Sequence[str]) -> Launch:
    """What ``words`` (a container's command + args, or one shell command) start."""
    i = _skip_prefix(words)
    if i >= len(words):
        return Launch("other", "no program at all", known=False)
    program = posixpath.basename(words[i])
    if program == "vllm":
        sub = words[i + 1] if i + 1 < len(words) else ""
        if sub == "serve":
            return Launch("vllm", "vllm serve", i, 2)
        return Launch("other", f"`vllm {sub}`" if sub else "`vllm` with no subcommand")
    if _PYTHON.fullmatch(program):
        return _python(words, i, program)
    if program in _SHELLS:
        return _shell(words, i, program)
    if program in _OTHER_PROGRAMS:
        return Launch("other", _OTHER_PROGRAMS[program])
    return Launch("other", repr(words[i]), known=False)


def _skip_prefix(words: Sequence[str]) -> int:
    """Index of the program word, past ``exec``, ``env A=b``, ``VAR=x`` and similar."""
    i = 0
    while i < len(words):
        word = words[i]
        base = posixpath.basename(word)
        if word in _PREFIX_WORDS or _ASSIGNMENT.fullmatch(word):
            i += 1
        elif base == "env":
            i += 1
            while i < len(words) and (words[i].startswith("-") or _ASSIGNMENT.fullmatch(words[i])):
                i += 1
        elif base in ("tini", "dumb-init"):
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
        else:
            return i
    return i


def _python(words: Sequence[str], i: int, program: str) -> Launch:
    j = i + 1
    while j < len(words):
        word = words[j]
        if word == "-m" and j + 1 < len(words):
            return _python_module(words, i, j + 1, program)
        if word == "-c":
            return Launch("other", f"{program} -c (an inline Python program)")
        if word in ("-X", "-W"):
            j += 2
        elif word.startswith("-"):
            j += 1
        else:
            return Launch("other", f"{program} {word} (a Python program)")
    return Launch("other", f"{program} with no program")


def _python_module(words: Sequence[str], i: int, at: int, program: str) -> Launch:
    module = words[at]
    if module in _VLLM_MODULES:
        extra = _VLLM_MODULES[module]
        if extra and (at + 1 >= len(words) or words[at + 1] != "serve"):
            return Launch("other", f"{program} -m {module} without `serve`")
        return Launch("vllm", f"{program} -m {module}", i, at + 1 + extra - i)
    top = module.split(".", 1)[0]
    if top in _OTHER_MODULES:
        return Launch("other", _OTHER_MODULES[top])
    return Launch("other", f"{program} -m {module} (a Python module)")


def _shell(words: Sequence[str], i: int, program: str) -> Launch:
    j = i + 1
    while j < len(words):
        word = words[j]
        if word in ("-o", "+o", "-O", "+O"):
            j += 2
        elif word.startswith("-") and not word.startswith("--") and "c" in word:
            if j + 1 < len(words):
                return Launch("shell", program, script=j + 1)
            return Launch("other", f"{program} -c with no script")
        elif word.startswith(("-", "+")):
            j += 1
        else:
            return Launch("other", f"{program} {word} (a script file, which the tuner cannot read)")
    return Launch("other", f"{program} with no script")
