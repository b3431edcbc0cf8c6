"""Properties over generated command lines of every form: round trip, set-then-get, locality."""

import shlex
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from latency_tuner.vllm.args import VllmCommandLine

VALUE_FLAGS = [
    "max-num-batched-tokens",
    "max-num-seqs",
    "gpu-memory-utilization",
    "kv-cache-dtype",
    "speculative-config",
    "cpu-offload-gb",
    "port",
    "x-unknown-option",
]
BOOLEANS = ["enable-prefix-caching", "enable-chunked-prefill", "enforce-eager", "trust-remote-code"]

word = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"])
    | st.sampled_from("\n\t"),
    min_size=1,
    max_size=12,
).filter(lambda v: not v.startswith("-"))
model = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.]{0,10}(/[A-Za-z0-9_.-]{1,12})?", fullmatch=True)


@st.composite
def flag_tokens(draw: st.DrawFn) -> list[str]:
    """One flag in one of its spellings, as tokens."""
    kind = draw(st.sampled_from(["value", "equals", "boolean", "alias"]))
    if kind == "boolean":
        name = draw(st.sampled_from(BOOLEANS))
        return [f"--{'no-' if draw(st.booleans()) else ''}{name}"]
    if kind == "alias":
        return [draw(st.sampled_from(["-tp", "-pp", "-q"])), draw(word)]
    name = draw(st.sampled_from(VALUE_FLAGS))
    if draw(st.booleans()):
        name = name.replace("-", "_")
    value = draw(word)
    return [f"--{name}={value}"] if kind == "equals" else [f"--{name}", value]


@dataclass(frozen=True)
class Container:
    command: list[str] | None
    args: list[str] | None


@st.composite
def containers(draw: st.DrawFn) -> Container:
    name = draw(model)
    tokens = [t for group in draw(st.lists(flag_tokens(), max_size=6)) for t in group]
    form = draw(st.sampled_from(["entrypoint", "serve", "api_server", "shell", "shell-args"]))
    if form == "entrypoint":
        return Container(None, [name, *tokens])
    if form == "serve":
        argv = ["vllm", "serve", name, *tokens]
        split = draw(st.integers(min_value=2, max_value=len(argv)))
        has_args = draw(st.booleans()) or split < len(argv)
        return Container(argv[:split], argv[split:] if has_args else None)
    if form == "api_server":
        launcher = [draw(st.sampled_from(["python", "python3", "/usr/bin/python3"])), "-m"]
        return Container(
            [*launcher, "vllm.entrypoints.openai.api_server"], ["--model", name, *tokens]
        )
    separator = draw(st.sampled_from([" ", "  ", " \\\n  "]))
    before = draw(st.sampled_from(["", "exec ", "set -e; ", "pip install x && A=1 exec "]))
    after = draw(st.sampled_from(["", " && sleep 1", " 2>&1 | tee /tmp/log", "\n"]))
    script = before + separator.join(["vllm", "serve", *(shlex.quote(t) for t in [name, *tokens])])
    script += after
    if form == "shell":
        return Container(["/bin/sh", "-c", script], None)
    return Container(["/bin/bash", "-c"], [script])


def parse(container: Container) -> VllmCommandLine:
    return VllmCommandLine.parse(container.command, container.args)


@settings(max_examples=300)
@given(containers())
def test_rendering_an_unchanged_command_line_gives_back_what_was_parsed(c: Container) -> None:
    assert parse(c).render() == (c.command, c.args)


@settings(max_examples=300)
@given(containers(), st.sampled_from([*VALUE_FLAGS, "tensor-parallel-size"]), word)
def test_a_value_set_is_the_value_read(c: Container, flag: str, value: str) -> None:
    changed = parse(c).with_value(flag, value)
    assert changed.get(flag) == value
    command, args = changed.render()
    assert VllmCommandLine.parse(command, args).get(flag) == value


@settings(max_examples=300)
@given(containers(), st.sampled_from(BOOLEANS), st.booleans())
def test_a_flag_switched_is_the_state_read(c: Container, flag: str, enabled: bool) -> None:
    command, args = parse(c).with_flag(flag, enabled).render()
    assert VllmCommandLine.parse(command, args).flag_enabled(flag) is enabled


@settings(max_examples=300)
@given(containers(), st.sampled_from(VALUE_FLAGS + BOOLEANS + ["tensor-parallel-size"]), word)
def test_a_change_touches_only_its_flag(c: Container, flag: str, value: str) -> None:
    line = parse(c)
    changed = (
        line.with_flag(flag, value.startswith("a"))
        if flag in BOOLEANS
        else line.with_value(flag, value)
    )
    # with the flag removed from both, every other token is identical (the shell text too)
    assert changed.without(flag).render() == line.without(flag).render()
    command, args = changed.render()
    again = VllmCommandLine.parse(command, args)
    assert again.model == line.model
    key = flag
    assert [f for f in again.flags() if f[0].removeprefix("no-") != key] == [
        f for f in line.flags() if f[0].removeprefix("no-") != key
    ]


@settings(max_examples=200)
@given(containers(), st.sampled_from(VALUE_FLAGS + BOOLEANS))
def test_removing_a_flag_leaves_it_absent(c: Container, flag: str) -> None:
    command, args = parse(c).without(flag).render()
    again = VllmCommandLine.parse(command, args)
    assert not again.has(flag)
