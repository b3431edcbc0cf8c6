"""Reads a POSIX shell script into words that remember where they stand in the text.

``shlex`` gives the words of a script but not their offsets; to rewrite one flag of a
``sh -c "vllm serve ..."`` container and keep every other character as written we need both.
This module splits a script into words (with their unquoted value and their ``[start, end)``
span), command separators (``&&``, ``||``, ``;``, ``|``, ``&``, newline, parentheses) and
redirections (``2>&1``, ``> /tmp/log``), then groups the words into simple commands.

It understands quotes, backslash escapes, line continuations, comments, ``$(...)``, ``${...}``
and backticks well enough to find word boundaries; it never expands anything (``$MODEL`` stays
the literal text ``$MODEL``) and never runs anything. Private to ``latency_tuner.vllm.args``.
"""

from __future__ import annotations

from dataclasses import dataclass

_SEPARATORS = ("&&", "||", ";;", ";", "|", "&", "(", ")", "\n")
_BLANKS = " \t\r"


class ShellSyntaxError(ValueError):
    """The script cannot be split into words (an unclosed quote or substitution)."""


@dataclass(frozen=True)
class Word:
    """One shell word: ``value`` after quote removal, ``text[start:end]`` as written."""

    value: str
    start: int
    end: int


@dataclass(frozen=True)
class _Separator:
    start: int
    end: int


def simple_commands(script: str) -> list[list[Word]]:
    """The script's simple commands, each as its words (redirections left out)."""
    commands: list[list[Word]] = []
    current: list[Word] = []
    for item in _tokens(script):
        if isinstance(item, _Separator):
            if current:
                commands.append(current)
            current = []
        elif item is not None:
            current.append(item)
    if current:
        commands.append(current)
    return commands


def _tokens(script: str) -> list[Word | _Separator | None]:
    """Words and separators in order; ``None`` stands for a redirection (kept out of argv)."""
    out: list[Word | _Separator | None] = []
    i = 0
    n = len(script)
    while i < n:
        ch = script[i]
        if ch in _BLANKS:
            i += 1
        elif script.startswith("\\\n", i):
            i += 2
        elif ch == "#":
            while i < n and script[i] != "\n":
                i += 1
        elif ch in "<>" or script.startswith("&>", i):
            i = _redirection(script, i)
            out.append(None)
        else:
            op = next((s for s in _SEPARATORS if script.startswith(s, i)), None)
            if op is not None:
                out.append(_Separator(i, i + len(op)))
                i += len(op)
                continue
            word, i = _word(script, i)
            if i < n and script[i] in "<>" and word.value.isdigit() and word.end == i:
                # "2>&1": the digits are the redirection's file descriptor, not an argument
                i = _redirection(script, i)
                out.append(None)
            else:
                out.append(word)
    return out


def _redirection(script: str, i: int) -> int:
    """Skips a redirection operator and its target word; returns the index after them."""
    n = len(script)
    while i < n and script[i] in "<>&|":
        i += 1
    while i < n and script[i] in _BLANKS:
        i += 1
    if i < n and script[i] not in "\n;|&()":
        _, i = _word(script, i)
    return i


def _word(script: str, start: int) -> tuple[Word, int]:
    """Reads one word beginning at ``start``."""
    n = len(script)
    i = start
    value: list[str] = []
    while i < n:
        ch = script[i]
        if ch in _BLANKS or ch in "\n;|&()<>":
            break
        if ch == "\\":
            if i + 1 < n and script[i + 1] == "\n":
                i += 2
                continue
            value.append(script[i + 1 : i + 2])
            i += 2
        elif ch == "'":
            close = script.find("'", i + 1)
            if close < 0:
                raise ShellSyntaxError(f"unclosed single quote at offset {i}")
            value.append(script[i + 1 : close])
            i = close + 1
        elif ch == '"':
            i = _double_quoted(script, i + 1, value)
        elif ch == "$" and i + 1 < n and script[i + 1] in "({":
            close = _matching(script, i + 1)
            value.append(script[i : close + 1])
            i = close + 1
        elif ch == "`":
            close = script.find("`", i + 1)
            if close < 0:
                raise ShellSyntaxError(f"unclosed backtick at offset {i}")
            value.append(script[i : close + 1])
            i = close + 1
        else:
            value.append(ch)
            i += 1
    return Word("".join(value), start, i), i


def _double_quoted(script: str, i: int, value: list[str]) -> int:
    """Reads the inside of a double-quoted string from ``i``; returns the index after it."""
    n = len(script)
    while i < n:
        ch = script[i]
        if ch == '"':
            return i + 1
        if ch == "\\" and i + 1 < n and script[i + 1] in '$`"\\\n':
            if script[i + 1] != "\n":
                value.append(script[i + 1])
            i += 2
        elif ch == "$" and i + 1 < n and script[i + 1] in "({":
            close = _matching(script, i + 1)
            value.append(script[i : close + 1])
            i = close + 1
        else:
            value.append(ch)
            i += 1
    raise ShellSyntaxError("unclosed double quote")


def _matching(script: str, i: int) -> int:
    """Index of the bracket closing the one at ``i`` (nesting counted, quotes skipped)."""
    opening = script[i]
    closing = ")" if opening == "(" else "}"
    depth = 0
    quote = ""
    for j in range(i, len(script)):
        ch = script[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return j
    raise ShellSyntaxError(f"unclosed {opening} at offset {i}")
