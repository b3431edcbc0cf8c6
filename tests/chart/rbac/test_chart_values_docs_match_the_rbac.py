"""The values docs promise no more than the RBAC grants: what `rbac.readNodes` says the
operator may do on nodes is exactly the verbs of the rendered rule."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from tests.chart.conftest import CHART, Manifest

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")


def node_verbs(manifests: list[Manifest]) -> set[str]:
    return {
        verb
        for m in manifests if m["kind"] == "ClusterRole"
        for rule in m.get("rules") or [] if "nodes" in rule.get("resources", [])
        for verb in rule["verbs"]
    }  # fmt: skip


def granted_in_words(text: str) -> set[str]:
    # "Grant `get` on nodes (no list, no watch ...)": the verbs named before "on nodes".
    match = re.search(r"Grant (.+?) on nodes", text)
    assert match, text
    return {verb for verb in VERBS if re.search(rf"\b{verb}\b", match.group(1))}


def test_every_description_of_read_nodes_names_exactly_the_granted_verbs(
    render: Callable[[str], list[Manifest]],
) -> None:
    granted = node_verbs(render("defaults"))
    assert granted == {"get"}
    assert node_verbs(render("scrape-without-nodes")) == set()  # readNodes: false
    values = (CHART / "values.yaml").read_text()
    comment = values.split("readNodes:")[0].rsplit("# --", 1)[1]
    schema = json.loads((CHART / "values.schema.json").read_text())
    described = schema["properties"]["rbac"]["properties"]["readNodes"]["description"]
    row = next(line for line in (CHART / "README.md").read_text().splitlines()
               if line.startswith("| `rbac.readNodes`"))  # fmt: skip
    for text in (comment, described, row):
        assert granted_in_words(" ".join(text.replace("#", " ").split())) == granted
