"""The command line of a vLLM server container: read it, change one flag, write it back.

(Past 500 lines on purpose: reading, changing and rendering one command line share its token
model and belong together; the flag tables, launch forms and shell reader are already apart.)

``VllmCommandLine.parse(command, args)`` takes a container's ``command`` and ``args`` in any of
the forms seen in Deployments:

- the ``vllm/vllm-openai`` image entrypoint: ``command`` unset, ``args`` start with the model;
- ``vllm serve MODEL ...`` or ``vllm serve --model MODEL ...``;
- ``python[3] -m vllm.entrypoints.openai.api_server --model MODEL ...`` (any python path);
- a shell: ``["/bin/sh", "-c", "vllm serve ... && sleep 1"]``, ``bash -c "exec vllm ..."``,
  with env assignments, ``exec``, line continuations and other commands around it;

and flags as ``--flag value``, ``--flag=value``, ``--flag_with_underscores``, short aliases
(``-tp 2``, ``-q awq``, ``-O3``), booleans (``--x``, ``--no-x``, old ``--x=false``) and JSON
values. Changes (``with_value``, ``with_flag``, ``without``, ``with_model``) return new objects
and ``render()`` gives back ``(command, args)`` in the original shape where every token the
change did not touch is exactly as written (order, spelling, quoting; inside a shell string only
the changed words are re-quoted with ``shlex.quote``). A new flag is appended after the last
vLLM argument: at the end of ``args`` when the container has ``args``, else of ``command``,
or inside the shell string right after the vLLM command.

Which tokens are values: known boolean flags take none (an old-style ``true``/``false`` after
one is read as its value), known multi-value flags (``--served-model-name a b``) take every
following token up to the next option, and every other flag -- known or unknown -- takes the
next token unless it looks like an option (starts with ``-`` and is not a number). So an
unknown *boolean* flag written right before the positional model (``--new-bool MODEL``) would
swallow the model; vLLM's own flags are all in the table.

This module never expands variables (``$MODEL`` stays literal), never reads files or images,
and never decides what to tune: it only reads and rewrites text. Pure, no I/O.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from latency_tuner.vllm import _args_flags as flags
from latency_tuner.vllm._args_launch import identify
from latency_tuner.vllm._args_shell import ShellSyntaxError, simple_commands

Part = Literal["command", "args"]

# A Hugging Face id (org/name), a path, or a variable the kubelet or shell expands.
_MODEL_LIKE = re.compile(r"[A-Za-z0-9][\w.-]*/[\w./-]+|[/.~][^\s]*|\$\(?\w+\)?")
# The image's repository path (registry and tag left out) names vLLM.
_VLLM_IMAGE = re.compile(r"(^|/)[\w.-]*vllm[\w.-]*(/|$)", re.IGNORECASE)


def is_vllm_image(image: str | None) -> bool:
    """``vllm/vllm-openai:v0.11.0``, ``rocm/vllm``, ``registry.example/ml/vllm-cpu@sha256:...``."""
    if not image:
        return False
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return _VLLM_IMAGE.search(name) is not None


class NotVllmError(ValueError):
    """The container does not run vLLM's server (the message says what it runs instead)."""


@dataclass(frozen=True)
class _ListPlace:
    part: Part
    index: int


@dataclass(frozen=True)
class _ShellPlace:
    start: int
    end: int
    value: str  # the word as parsed, to tell a changed word from an untouched one


@dataclass(frozen=True)
class _Shell:
    """Where the shell script sits and where, in it, the vLLM arguments start."""

    part: Part
    index: int
    script: str
    anchor: int  # end offset of the launcher's last word


@dataclass(frozen=True)
class _Tok:
    value: str
    ref: int | None  # index into VllmCommandLine._places; None for a token we added
    # an added token that belongs to the token before it (a value set on an existing flag):
    # rendered next to it even after the last original token, not at the end of args
    sticky: bool = False


@dataclass(frozen=True)
class _Option:
    """One option (or positional) of the vLLM argument list, by token indices."""

    key: str  # canonical flag name; "" for a positional
    at: int  # the flag's (or positional's) token
    values: tuple[int, ...] = ()  # separate value tokens
    prefix: str | None = None  # value written inside the flag token, after this text


def _looks_like_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not flags.is_number(token)


def _takes_no_value(key: str) -> bool:
    return key in flags.BOOLEAN_FLAGS or (key.startswith("no-") and key[3:] in flags.BOOLEAN_FLAGS)


def _scan(values: Sequence[str]) -> list[_Option]:
    """Splits vLLM's argument list into options the way its argparse parser would."""
    options: list[_Option] = []
    i = 0
    n = len(values)
    while i < n:
        token = values[i]
        if token == "--":
            options.extend(_Option("", j) for j in range(i + 1, n))
            break
        if not _looks_like_option(token):
            options.append(_Option("", i))
            i += 1
            continue
        option = _attached(token, i, values)
        if option is None:
            key = flags.canonical(token)
            option = _Option(key, i, _value_tokens(key, i, values))
        options.append(option)
        i = max(option.values, default=i) + 1
    return options


def _attached(token: str, i: int, values: Sequence[str]) -> _Option | None:
    """Options whose value is inside the token (``--x=v``, ``-tp=2``, ``-O3``) or ``-O``."""
    if token.startswith("--"):
        name, eq, _ = token.partition("=")
        return _Option(flags.canonical(name), i, prefix=name + eq) if eq else None
    if token.startswith("-O"):
        if len(token) > 2:
            prefix = "-O=" if token.startswith("-O=") else "-O"
            return _Option("optimization-level", i, prefix=prefix)
        follower = values[i + 1] if i + 1 < len(values) else ""
        key = "optimization-level" if follower in ("0", "1", "2", "3") else "compilation-config"
        return _Option(key, i, _value_tokens(key, i, values))
    name, eq, _ = token.partition("=")
    return _Option(flags.canonical(name), i, prefix=name + eq) if eq else None


def _value_tokens(key: str, i: int, values: Sequence[str]) -> tuple[int, ...]:
    following = values[i + 1] if i + 1 < len(values) else None
    if following is None:
        return ()
    if _takes_no_value(key):
        # old StoreBoolean flags accepted "--enable-chunked-prefill False"
        plain = not key.startswith("no-")
        return (i + 1,) if plain and flags.bool_literal(following) is not None else ()
    if key in flags.MULTI_VALUE_FLAGS:
        j = i + 1
        while j < len(values) and not _looks_like_option(values[j]):
            j += 1
        return tuple(range(i + 1, j))
    return () if _looks_like_option(following) else (i + 1,)


@dataclass(frozen=True)
class VllmCommandLine:
    """A parsed vLLM server command line; immutable, every change returns a new one."""

    launcher: str  # e.g. "vllm serve", "python3 -m vllm.entrypoints.openai.api_server"
    _command: tuple[str, ...] | None
    _args: tuple[str, ...] | None
    _places: tuple[_ListPlace | _ShellPlace, ...]
    _toks: tuple[_Tok, ...]
    _shell: _Shell | None = None

    # ----------------------------------------------------------------- parse

    @classmethod
    def of_container(
        cls, command: Sequence[str] | None, args: Sequence[str] | None, *, image: str | None
    ) -> VllmCommandLine:
        """A container's command line, only if the container really runs vLLM's server.

        Stricter than ``parse`` where ``parse`` must guess: without a ``command`` (the image's
        entrypoint runs) the container is taken for vLLM only when its image is a vLLM image,
        or when its args start with a model-like positional (``org/name``, a path) followed by
        at least one flag only vLLM has. So Postgres, Redis, MinIO, nginx or Envoy style args
        are refused with what they look like, and the operator never rewrites them.
        """
        line = cls.parse(command, args)
        if line.launcher != "image entrypoint" or is_vllm_image(image):
            return line
        keys = [o.key for o in line._options() if o.key]
        model = line.model or ""
        if not _MODEL_LIKE.fullmatch(model) or not any(map(flags.is_vllm_flag, keys)):
            arg = tuple(args or ())
            shown = f"image {image}" if image else "an unnamed image"
            raise NotVllmError(
                f"this container has no command, runs {shown}, and its args "
                f"({shlex.join(arg[:4])}{' ...' if len(arg) > 4 else ''}) are not a vLLM "
                "server's: a model ('org/name' or a path) followed by vLLM flags"
            )
        return line

    @classmethod
    def parse(cls, command: Sequence[str] | None, args: Sequence[str] | None) -> VllmCommandLine:
        """Reads a container's ``command`` and ``args``; raises NotVllmError if not vLLM.

        Reads text: with no ``command``, any args naming a model are taken for vLLM's image
        entrypoint. To decide whether a real container runs vLLM, use ``of_container``.
        """
        cmd = tuple(command) if command is not None else None
        arg = tuple(args) if args is not None else None
        flat: list[tuple[Part, int, str]] = [("command", i, w) for i, w in enumerate(cmd or ())]
        flat += [("args", i, w) for i, w in enumerate(arg or ())]
        words = [w for _, _, w in flat]
        launch = identify(words)
        if cmd is None and launch.kind == "other" and not launch.known:
            return cls._from_entrypoint(arg or ())
        if launch.kind == "vllm":
            places = tuple(_ListPlace(p, i) for p, i, _ in flat[launch.skip + launch.length :])
            toks = tuple(_Tok(w, k) for k, w in enumerate(words[launch.skip + launch.length :]))
            return cls(launch.what, cmd, arg, places, toks)
        if launch.kind == "shell":
            part, index, script = flat[launch.script]
            return cls._from_shell(cmd, arg, _Shell(part, index, script, 0), launch.what)
        raise NotVllmError(f"this container runs {launch.what}, not a vLLM server")

    @classmethod
    def _from_entrypoint(cls, arg: tuple[str, ...]) -> VllmCommandLine:
        """No command: the image's entrypoint (``vllm serve`` in vllm/vllm-openai) gets args."""
        places = tuple(_ListPlace("args", i) for i in range(len(arg)))
        toks = tuple(_Tok(w, i) for i, w in enumerate(arg))
        line = cls("image entrypoint", None, arg, places, toks)
        if line.model is None:
            keys = {o.key for o in line._options()}
            if "model-id" in keys:
                raise NotVllmError(
                    "this container's args name --model-id, as Hugging Face TGI (or KServe's "
                    "huggingfaceserver) does, not a vLLM server"
                )
            raise NotVllmError(
                "this container has no command and its args name no model, so it cannot be "
                "the vLLM image's `vllm serve` entrypoint"
            )
        return line

    @classmethod
    def _from_shell(
        cls,
        cmd: tuple[str, ...] | None,
        arg: tuple[str, ...] | None,
        shell: _Shell,
        program: str,
    ) -> VllmCommandLine:
        """The vLLM command inside a shell script (the first one, if there are several)."""
        try:
            commands = simple_commands(shell.script)
        except ShellSyntaxError as exc:
            raise NotVllmError(f"this container's shell script cannot be read: {exc}") from exc
        found: list[str] = []
        for words in commands:
            launch = identify([w.value for w in words])
            if launch.kind == "vllm":
                first = launch.skip + launch.length
                places = tuple(_ShellPlace(w.start, w.end, w.value) for w in words[first:])
                toks = tuple(_Tok(w.value, k) for k, w in enumerate(words[first:]))
                shell = replace(shell, anchor=words[first - 1].end)
                return cls(f"{program} -c {launch.what}", cmd, arg, places, toks, shell)
            if launch.kind == "shell":
                found.append(f"a nested `{launch.what} -c` script, which the tuner does not read")
            else:
                found.append(launch.what)
        what = ", ".join(dict.fromkeys(found)) or "an empty shell script"
        raise NotVllmError(f"this container runs {what}, not a vLLM server")

    # ----------------------------------------------------------------- read

    def _values(self) -> list[str]:
        return [t.value for t in self._toks]

    def _options(self) -> list[_Option]:
        return _scan(self._values())

    def _value_of(self, option: _Option) -> str | None:
        if option.key == "":
            return self._toks[option.at].value
        if option.prefix is not None:
            return self._toks[option.at].value[len(option.prefix) :]
        if option.values:
            return " ".join(self._toks[v].value for v in option.values)
        return None

    def _last(self, *keys: str) -> _Option | None:
        found = [o for o in self._options() if o.key in keys]
        return found[-1] if found else None

    @property
    def model(self) -> str | None:
        """The served model: ``--model``'s value, else the first positional argument.

        None only when the command line names none (vLLM then reads it from ``--config``).
        """
        option = self._model_option()
        return None if option is None else self._value_of(option)

    def _model_option(self) -> _Option | None:
        options = self._options()
        flagged = [o for o in options if o.key == "model" and self._value_of(o) is not None]
        if flagged:
            return flagged[-1]
        return next((o for o in options if o.key == ""), None)

    @property
    def served_model_name(self) -> str | None:
        """The name in metrics' ``model_name`` label: first ``--served-model-name``, else model."""
        value = self.get("served-model-name")
        return value.split()[0] if value else self.model

    def get(self, name: str) -> str | None:
        """The value of flag ``name`` as written (last occurrence wins, as in argparse).

        ``name`` may be written any way (``max_num_seqs``, ``--max-num-seqs``, ``tp``); None when
        the flag is absent or present without a value (use ``flag_enabled`` for booleans).
        Several values (``--served-model-name a b``) come back joined by one space.
        """
        key = flags.key_for(name)
        if key == "model":
            return self.model
        option = self._last(key)
        return None if option is None else self._value_of(option)

    def has(self, name: str) -> bool:
        """Whether flag ``name`` (or its ``--no-`` form) is written at all."""
        key = flags.key_for(name)
        return self._last(key, "no-" + key) is not None

    def flag_enabled(self, name: str) -> bool | None:
        """True for ``--x`` / ``--x=true``, False for ``--no-x`` / ``--x=false``, None if absent.

        Raises ValueError for a value that is not a boolean (``--x=maybe``).
        """
        key = flags.key_for(name)
        option = self._last(key, "no-" + key)
        if option is None:
            return None
        if option.key != key:
            return False
        value = self._value_of(option)
        if value is None:
            return True
        parsed = flags.bool_literal(value)
        if parsed is None:
            raise ValueError(f"--{key} has the value {value!r}, which is not a boolean")
        return parsed

    def flags(self) -> tuple[tuple[str, str | None], ...]:
        """Every flag in order as (canonical name, value or None); the model is left out."""
        model = self._model_option()
        return tuple((o.key, self._value_of(o)) for o in self._options() if o.key and o != model)

    # ----------------------------------------------------------------- change

    def with_value(self, name: str, value: str) -> VllmCommandLine:
        """Sets flag ``name`` to ``value``: replaces its last occurrence, else appends it."""
        key = flags.key_for(name)
        if key == "model":
            return self.with_model(value)
        option = self._last(key)
        if option is None:
            if _looks_like_option(value):
                return self._appended([f"--{key}={value}"])
            return self._appended([f"--{key}", value])
        return self._set(option, value)

    def with_model(self, model: str) -> VllmCommandLine:
        """Serves ``model`` instead: rewrites ``--model`` or the positional model in place."""
        option = self._model_option()
        if option is None:
            # first, where vLLM expects it; the old api_server takes no positional model
            first = ["--model", model] if "api_server" in self.launcher else [model]
            return replace(self, _toks=tuple(_Tok(v, None) for v in first) + self._toks)
        if option.key == "":
            return self._edited({option.at: [model]})
        return self._set(option, model)

    def with_flag(self, name: str, enabled: bool) -> VllmCommandLine:
        """Writes ``--x`` (enabled) or ``--no-x`` in place of the flag's last form, else appends."""
        key = flags.key_for(name)
        spelled = f"--{key}" if enabled else f"--no-{key}"
        option = self._last(key, "no-" + key)
        if option is None:
            return self._appended([spelled])
        edits: dict[int, list[str]] = {option.at: [spelled]}
        edits.update({v: [] for v in option.values})
        return self._edited(edits)

    def without(self, name: str) -> VllmCommandLine:
        """Removes every occurrence of the flag (and ``--no-`` form) with its values."""
        key = flags.key_for(name)
        if key == "model":
            raise ValueError("the model cannot be removed from a vLLM command line")
        edits: dict[int, list[str]] = {}
        for option in self._options():
            if option.key in (key, "no-" + key):
                edits.update({i: [] for i in (option.at, *option.values)})
        return self._edited(edits)

    def _set(self, option: _Option, value: str) -> VllmCommandLine:
        if option.prefix is not None:
            return self._edited({option.at: [option.prefix + value]})
        if not option.values:
            flag = self._toks[option.at].value
            if _looks_like_option(value) or _takes_no_value(option.key):
                return self._edited({option.at: [f"{flag}={value}"]})
            return self._edited({option.at: [flag, value]})
        edits: dict[int, list[str]] = {option.values[0]: [value]}
        edits.update({v: [] for v in option.values[1:]})
        return self._edited(edits)

    def _edited(self, edits: dict[int, list[str]]) -> VllmCommandLine:
        """Token ``i`` becomes ``edits[i]``: its first item keeps the token's place, the rest
        are new tokens right after it; an empty list deletes the token."""
        toks: list[_Tok] = []
        for i, tok in enumerate(self._toks):
            if i not in edits:
                toks.append(tok)
                continue
            new = edits[i]
            if new:
                same = new[0] == tok.value
                toks.append(tok if same else replace(tok, value=new[0]))
                toks.extend(_Tok(v, None, sticky=True) for v in new[1:])
        return replace(self, _toks=tuple(toks))

    def _appended(self, values: list[str]) -> VllmCommandLine:
        return replace(self, _toks=self._toks + tuple(_Tok(v, None) for v in values))

    # ----------------------------------------------------------------- render

    def render(self) -> tuple[list[str] | None, list[str] | None]:
        """``(command, args)`` in the shape they were given, with the changes applied."""
        if self._shell is not None:
            return self._render_shell(self._shell)
        return self._render_lists()

    def _groups(self) -> list[tuple[int | None, list[str]]]:
        """Added tokens grouped by the original token they follow: ``(ref, values)``; ref None
        for tokens before every surviving original, -1 for the tail (appended flags, at the end
        of args or of the vLLM command)."""
        groups: list[tuple[int | None, list[str]]] = []
        anchor: int | None = None
        current: list[str] = []
        refs = [i for i, t in enumerate(self._toks) if t.ref is not None]
        last = refs[-1] if refs else -1
        for i, tok in enumerate(self._toks):
            if tok.ref is not None:
                if current:
                    groups.append((anchor, current))
                    current = []
                anchor = tok.ref
            elif i > last and not tok.sticky and anchor != -1:
                if current:
                    groups.append((anchor, current))
                    current = []
                anchor = -1
                current.append(tok.value)
            else:
                current.append(tok.value)
        if current:
            groups.append((anchor, current))
        return groups

    def _render_lists(self) -> tuple[list[str] | None, list[str] | None]:
        parts: dict[Part, list[list[str]]] = {
            "command": [[w] for w in self._command or ()],
            "args": [[w] for w in self._args or ()],
        }
        for place in self._places:
            assert isinstance(place, _ListPlace)
            parts[place.part][place.index] = []
        surviving = [t for t in self._toks if t.ref is not None]
        for tok in surviving:
            assert tok.ref is not None
            place = self._places[tok.ref]
            assert isinstance(place, _ListPlace)
            parts[place.part][place.index].append(tok.value)
        tail: list[str] = []
        for anchor, group in self._groups():
            if anchor == -1:
                tail.extend(group)
            elif anchor is None:
                first = self._places[0]
                assert isinstance(first, _ListPlace)
                parts[first.part][first.index][:0] = group
            else:
                place = self._places[anchor]
                assert isinstance(place, _ListPlace)
                parts[place.part][place.index].extend(group)
        tail_part: Part = "args" if self._args is not None or self._command is None else "command"
        command = [w for slot in parts["command"] for w in slot]
        args = [w for slot in parts["args"] for w in slot]
        (args if tail_part == "args" else command).extend(tail)
        return (
            command if self._command is not None else None,
            args if self._args is not None or tail_part == "args" else None,
        )

    def _render_shell(self, shell: _Shell) -> tuple[list[str] | None, list[str] | None]:
        edits: list[tuple[int, int, str]] = []
        kept = {t.ref: t.value for t in self._toks if t.ref is not None}
        previous_end = shell.anchor
        originals = [(self._places[r], r) for r in range(len(self._places))]
        for place, ref in originals:
            assert isinstance(place, _ShellPlace)
            if ref not in kept:
                edits.append((previous_end, place.end, ""))
            elif kept[ref] != place.value:
                edits.append((place.start, place.end, shlex.quote(kept[ref])))
            previous_end = place.end
        for anchor, group in self._groups():
            if anchor == -1:
                surviving = [t.ref for t in self._toks if t.ref is not None]
                at = self._shell_end(surviving[-1]) if surviving else shell.anchor
            elif anchor is None:
                at = shell.anchor
            else:
                at = self._shell_end(anchor)
            edits.append((at, at, " " + " ".join(shlex.quote(v) for v in group)))
        script = shell.script
        for start, end, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
            script = script[:start] + text + script[end:]
        command = list(self._command) if self._command is not None else None
        args = list(self._args) if self._args is not None else None
        target = command if shell.part == "command" else args
        assert target is not None
        target[shell.index] = script
        return command, args

    def _shell_end(self, ref: int) -> int:
        place = self._places[ref]
        assert isinstance(place, _ShellPlace)
        return place.end
