"""values.schema.json turns bad values into helm errors, and every value is documented.

Documentation is checked three ways: each key in values.yaml has a `# --` comment right above
it, values.schema.json knows exactly the keys values.yaml has, and README.md's table lists
every leaf value.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

CHART = Path(__file__).resolve().parents[3] / "charts" / "latency-tuner"
VALUES_TEXT = (CHART / "values.yaml").read_text()
VALUES: dict[str, Any] = yaml.safe_load(VALUES_TEXT)
SCHEMA: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())

# Maps holding user-chosen keys (labels, selectors, resources) are leaves for documentation.
FREE_FORM = {
    "resources",
    "vllmPodMonitor.selector",
    "podSecurityContext",
    "containerSecurityContext",
}

BAD_VALUES = [
    ({"log": {"format": "xml"}}, "/log/format"),
    ({"log": {"level": "verbose"}}, "/log/level"),
    ({"replicaCount": 0}, "/replicaCount"),
    ({"replicaCount": "2"}, "/replicaCount"),
    ({"watchNamespaces": ["Team_A"]}, "/watchNamespaces/0"),
    ({"watchNamespaces": ["a", "a"]}, "/watchNamespaces"),
    ({"interval": "30 seconds"}, "/interval"),
    ({"prometheus": {"url": "ftp://prometheus:9090"}}, "/prometheus/url"),
    ({"prometheus": {"allowPerResourceUrl": "yes"}}, "/prometheus/allowPerResourceUrl"),
    ({"prometheus": {"maxTargetsPerQuery": 0}}, "/prometheus/maxTargetsPerQuery"),
    ({"metricsSource": "statsd"}, "/metricsSource"),
    ({"prometheus": {"bearerToken": {"secret": "x"}}}, "secret"),
    ({"ports": {"probe": 70000}}, "/ports/probe"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"serviceMonitor": {"interval": "often"}}, "/serviceMonitor/interval"),
    ({"replicas": 3}, "replicas"),  # a plausible misspelling of replicaCount
    ({"sharding": {"shards": 0}}, "/sharding/shards"),
    ({"sharding": {"mode": "range"}}, "/sharding/mode"),
    ({"sharding": {"lease": "soon"}}, "/sharding/lease"),
]


def _leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    found = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in FREE_FORM:
            found += _leaves(value, f"{path}.")
        else:
            found.append(path)
    return found


def _schema_keys(schema: dict[str, Any], prefix: str = "") -> list[str]:
    found = []
    for key, sub in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        found.append(path)
        if sub.get("additionalProperties") is False and path not in FREE_FORM:
            found += _schema_keys(sub, f"{path}.")
    return found


def _value_keys(values: dict[str, Any], prefix: str = "") -> list[str]:
    found = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        found.append(path)
        if isinstance(value, dict) and path not in FREE_FORM:
            found += _value_keys(value, f"{path}.")
    return found


@pytest.mark.parametrize(("values", "where"), BAD_VALUES)
def test_helm_refuses_a_bad_value_and_says_where(
    helm: Any, values: dict[str, Any], where: str
) -> None:
    result = helm.template(values)
    assert result.returncode != 0
    assert where in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"prometheus": {"ca": {"existingSecret": "a", "existingConfigMap": "b"}}},
            "set existingSecret or existingConfigMap, not both",
        ),
        ({"prometheus": {"url": ""}}, "prometheus.url is required"),
    ],
)
def test_helm_refuses_combinations_the_schema_cannot_express(
    helm: Any, values: dict[str, Any], message: str
) -> None:
    result = helm.template(values)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_the_defaults_satisfy_the_schema() -> None:
    jsonschema.validate(VALUES, SCHEMA)


def test_the_schema_closes_the_top_level_to_unknown_keys() -> None:
    assert SCHEMA["additionalProperties"] is False


def test_the_schema_knows_exactly_the_keys_of_values_yaml() -> None:
    assert sorted(_schema_keys(SCHEMA)) == sorted(_value_keys(VALUES))


def test_every_value_has_a_comment_right_above_it() -> None:
    lines = VALUES_TEXT.splitlines()
    undocumented = []
    parents: list[tuple[int, str]] = []  # (indent, dotted path) of the enclosing keys
    for number, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z][\w.]*):(.*)$", line)
        if not match:
            continue
        indent, key, rest = len(match.group(1)), match.group(2), match.group(3)
        parents = [(i, p) for i, p in parents if i < indent]
        path = f"{parents[-1][1]}.{key}" if parents else key
        parents.append((indent, path))
        if any(p in FREE_FORM for _, p in parents[:-1]):
            continue  # keys the user chooses, inside a documented free-form map
        is_section = not rest.strip()
        comment = number - 1
        while comment >= 0 and re.match(rf"^ {{{indent}}}# (?!--)", lines[comment]):
            comment -= 1  # continuation lines of a multi-line comment
        documented = comment >= 0 and lines[comment].startswith(" " * indent + "# --")
        if not documented and not (is_section and path not in FREE_FORM):
            undocumented.append(f"{number + 1}: {line.strip()}")
    assert not undocumented


def test_the_readme_table_lists_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    listed = set(re.findall(r"^\| `([^`]+)` \|", readme, flags=re.MULTILINE))
    assert listed == set(_leaves(VALUES))
