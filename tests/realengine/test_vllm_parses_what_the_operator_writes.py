"""Conformance: every argument form the operator can write is parsed by real vLLM's own parser.

For each launch form ``latency_tuner.vllm.args`` supports (image entrypoint, ``vllm serve``,
``python -m vllm.entrypoints.openai.api_server``, a shell script), each knob of the catalog
(``core.knobs.apply``) is applied to command lines that write the flag in the ``=`` form, the
space form, with underscores, with short aliases and as booleans / ``--no-`` booleans; the
rendered arguments go through the parser vLLM's server builds (``argprobe``, run by the vLLM
venv's python, no server) and vLLM's values must be the ones the operator meant, for every
tuning flag written.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from latency_tuner.api.spec import QuantizationVariant
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs import CATALOG, Change, KnobName, apply
from latency_tuner.core.knobs.speculative_decoding import speculative_json
from latency_tuner.realengine import argprobe
from latency_tuner.realengine.venv import child_env
from latency_tuner.vllm import defaults
from latency_tuner.vllm.args import VllmCommandLine

pytestmark = pytest.mark.realengine

SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
# Flags as a user might have written them before the operator touches them.
WRITTEN_STYLES: dict[str, list[str]] = {
    "equals": ["--max-num-seqs=8", "--max-num-batched-tokens=1024", "--gpu-memory-utilization=0.9",
               "--kv-cache-dtype=auto", "--tensor-parallel-size=1", "--cpu-offload-gb=4",
               "--enforce-eager", "--no-enable-prefix-caching", "--no-enable-chunked-prefill"],
    "space": ["--max-num-seqs", "8", "--max-num-batched-tokens", "1024",
              "--gpu-memory-utilization", "0.9", "-tp", "1", "--cpu-offload-gb", "4",
              "--enforce-eager", "--enable-prefix-caching", "--enable-chunked-prefill",
              "--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 2})],
    "underscores": ["--max_num_seqs", "8", "--max_num_batched_tokens=1024", "--enforce_eager",
                    "--no-enable_prefix_caching"],
    "bare": [],
}  # fmt: skip


@dataclass(frozen=True)
class Launch:
    name: str
    launcher: str  # how argprobe parses it: "serve" or "api_server"

    def container(self, model: str, flags: Sequence[str]) -> tuple[list[str] | None, list[str]]:
        if self.name == "entrypoint":
            return None, [model, *flags]
        if self.name == "vllm-serve":
            return ["vllm", "serve"], [model, *flags]
        if self.name == "api-server":
            return ["python3", "-m", "vllm.entrypoints.openai.api_server"], [
                "--model",
                model,
                *flags,
            ]
        script = " ".join(shlex.quote(w) for w in ["vllm", "serve", model, *flags])
        return ["/bin/sh", "-c", f"echo starting && exec {script} 2>&1"], []

    def vllm_argv(self, command: list[str] | None, args: list[str] | None) -> list[str]:
        """What vLLM's parser gets: the words after the launcher."""
        words = [*(command or []), *(args or [])]
        if self.name == "entrypoint":
            return words
        if self.name == "shell":
            inner = shlex.split(words[2].split("exec ", 1)[1].removesuffix(" 2>&1"))
            return inner[2:]
        skip = 2 if self.name == "vllm-serve" else 3
        return words[skip:]


LAUNCHES = (
    Launch("entrypoint", "serve"),
    Launch("vllm-serve", "serve"),
    Launch("api-server", "api_server"),
    Launch("shell", "serve"),
)


def _change(knob: KnobName, to: str | None, **extra: Any) -> Change:
    return Change(knob, None, to, CATALOG[knob].knob_class, 0.1, 0.1, Bottleneck.QUEUEING,
                  "conformance", **extra)  # fmt: skip


def _changes(model: str) -> list[Change]:
    variant = QuantizationVariant(name="fp8", model=model, args=["-q", "fp8"])
    return [
        _change(KnobName.CPU_OFFLOAD, None),
        _change(KnobName.ENFORCE_EAGER, None),
        _change(KnobName.PREFIX_CACHING, "true"),
        _change(KnobName.PREFIX_CACHING, "false"),
        _change(KnobName.CHUNKED_PREFILL, "true", companions=(("max-num-batched-tokens", "2048"),)),
        _change(KnobName.CHUNKED_PREFILL, "false"),
        _change(KnobName.MAX_NUM_SEQS, "64"),
        _change(KnobName.MAX_NUM_BATCHED_TOKENS, "4096"),
        _change(KnobName.GPU_MEMORY_UTILIZATION, "0.95"),
        _change(KnobName.SPECULATIVE_DECODING, speculative_json(SPEC)),
        _change(KnobName.QUANTIZATION, "fp8", variant=variant),
        _change(KnobName.KV_CACHE_DTYPE, "fp8"),
        _change(KnobName.TENSOR_PARALLEL, "2"),
    ]


def _probe(python: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(python), "-m", argprobe.__name__],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def _operator_reading(line: VllmCommandLine) -> dict[str, Any]:
    """What the operator believes each written tuning flag is, as vLLM's field names."""
    seen: dict[str, Any] = {}
    for flag in defaults.TUNING_FLAGS:
        value = defaults.written_value(line, flag)
        if value is None:
            continue
        if flag in defaults.JSON_FLAGS and isinstance(value, str):
            value = json.loads(value)
        seen[flag.replace("-", "_")] = value
    return seen


def _expected_change(change: Change) -> dict[str, Any]:
    """vLLM's values the change itself must produce (removals: vLLM's own default)."""
    flag = CATALOG[change.knob].flag.replace("-", "_")
    if change.knob is KnobName.CPU_OFFLOAD:
        return {flag: 0}
    if change.knob is KnobName.ENFORCE_EAGER:
        return {flag: False}
    if change.knob in (KnobName.PREFIX_CACHING, KnobName.CHUNKED_PREFILL):
        out: dict[str, Any] = {flag: change.to_value == "true"}
        out.update({f.replace("-", "_"): int(v) for f, v in change.companions})
        return out
    if change.knob is KnobName.SPECULATIVE_DECODING:
        return {flag: SPEC}
    if change.knob is KnobName.QUANTIZATION:
        return {"quantization": "fp8"}
    assert change.to_value is not None
    number = float(change.to_value) if "." in change.to_value else change.to_value
    return {flag: int(number) if isinstance(number, str) and number.isdigit() else number}


Meant = tuple[str, dict[str, Any], dict[str, Any]]  # label, the change's values, the reading


def _cases(launch: Launch, model: str) -> tuple[list[dict[str, Any]], list[Meant]]:
    cases: list[dict[str, Any]] = []
    meant: list[Meant] = []
    for style, flags in WRITTEN_STYLES.items():
        command, args = launch.container(model, flags)
        original = VllmCommandLine.parse(command, args)
        for change in _changes(model):
            line = apply(change, original).command_line
            new_command, new_args = line.render()
            argv = launch.vllm_argv(new_command, new_args)
            cases.append({"launcher": launch.launcher, "argv": argv})
            meant.append((f"{style}: {change.describe()}: {argv}", _expected_change(change),
                          _operator_reading(line)))  # fmt: skip
    return cases, meant


@pytest.fixture(scope="module")
def parsed(vllm_py: Path, tiny_model: Path) -> dict[str, list[tuple[Meant, dict[str, Any]]]]:
    """Every launch form's cases, parsed by vLLM in one process (its import takes ~20 s)."""
    everything: list[dict[str, Any]] = []
    spans: dict[str, tuple[int, list[Meant]]] = {}
    for launch in LAUNCHES:
        cases, meant = _cases(launch, str(tiny_model))
        spans[launch.name] = (len(everything), meant)
        everything += cases
    results = _probe(vllm_py, everything)
    return {
        name: list(zip(meant, results[start : start + len(meant)], strict=True))
        for name, (start, meant) in spans.items()
    }


@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda launch: launch.name)
def test_real_vllm_parses_every_knob_change_in_every_written_style(
    launch: Launch, parsed: dict[str, list[tuple[Meant, dict[str, Any]]]]
) -> None:
    problems = []
    for (label, expected, reading), result in parsed[launch.name]:
        if not result["ok"]:
            problems.append(f"{label}\n  vLLM refused it: {result['error']}")
            continue
        values = result["values"]
        for field, want in {**reading, **expected}.items():
            if values[field] != want:
                problems.append(f"{label}\n  {field}: vLLM read {values[field]!r}, meant {want!r}")
    assert len(parsed[launch.name]) == len(WRITTEN_STYLES) * len(_changes("/models/m"))
    assert not problems, "\n".join(problems)


def test_real_vllm_refuses_the_old_boolean_value_form_the_operator_only_reads(
    vllm_py: Path, tiny_model: Path
) -> None:
    """``--x=false`` is read by ``vllm.args`` (old StoreBoolean releases) but never written:
    current vLLM refuses it, while both the ``--no-`` form and ``-O`` levels parse."""
    model = str(tiny_model)
    results = _probe(vllm_py, [
        {"launcher": "serve", "argv": [model, "--enable-chunked-prefill=false"]},
        {"launcher": "serve", "argv": [model, "--no-enable-chunked-prefill"]},
        {"launcher": "serve", "argv": [model, "-O0"]},
        {"launcher": "serve", "argv": [model, "-O", "3"]},
    ])  # fmt: skip
    assert [r["ok"] for r in results] == [False, True, True, True]
    assert "ignored explicit argument" in str(results[0]["error"])
    assert results[1]["values"]["enable_chunked_prefill"] is False
    assert [str(r["values"]["optimization_level"]) for r in results[2:]] == ["0", "3"]
