"""Label and field selectors, as lists and watches filter by them.

Pure; a selector that does not parse is a 400 BadRequest.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from latency_tuner.sandbox.apiserver._errors import bad_request

_LABEL_TERM = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9_.-]*)"
    r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)


def _split_terms(selector: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [term for term in terms if term.strip()]


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists"
    values: frozenset[str]
    negated: bool

    def holds(self, labels: Mapping[str, str]) -> bool:
        if self.op == "=":
            ok = labels.get(self.key) in self.values
        elif self.op == "!=":
            ok = labels.get(self.key) not in self.values
        elif self.op in ("in", "notin"):
            ok = (labels.get(self.key) in self.values) == (self.op == "in")
            ok = ok and (self.op == "notin" or self.key in labels)
        else:
            ok = self.key in labels
        return bool(self.negated) != ok


# A list or watch checks one selector against every object it holds: parse it once, not once
# per object (at 10,000 pods the parsing was most of the emulator's time).
@functools.lru_cache(maxsize=1024)
def _label_requirements(selector: str) -> tuple[_Requirement, ...]:
    found = []
    for term in _split_terms(selector):
        match = _LABEL_TERM.match(term)
        if match is None:
            raise bad_request(f"unable to parse requirement: {term!r}")
        if match["op"]:
            op, values = ("!=" if match["op"] == "!=" else "="), frozenset([match["value"]])
        elif match["setop"]:
            op = match["setop"]
            values = frozenset(v.strip() for v in match["values"].split(",") if v.strip())
        else:
            op, values = "exists", frozenset()
        found.append(_Requirement(match["key"], op, values, bool(match["neg"])))
    return tuple(found)


def label_selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """Kubernetes label selector syntax: `a=b,c!=d,e in (f,g),h notin (i),j,!k`."""
    return all(r.holds(labels) for r in _label_requirements(selector))


def field_selector_matches(selector: str, obj: Mapping[str, Any]) -> bool:
    """Equality field selectors on any dotted path: `metadata.name=x,status.phase!=Running`."""
    for term in _split_terms(selector):
        found = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if found is None:
            raise bad_request(f"invalid field selector: {term!r}")
        path, op, wanted = found.groups()
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        actual = (
            "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        )
        if (actual == wanted) != (op != "!="):
            return False
    return True


def matches(obj: Mapping[str, Any], labels: str | None, fields: str | None) -> bool:
    """Whether `obj` passes both selectors (an empty or missing one passes everything)."""
    if labels and not label_selector_matches(labels, obj["metadata"].get("labels") or {}):
        return False
    return not (fields and not field_selector_matches(fields, obj))
