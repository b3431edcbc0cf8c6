"""The install notes tell the user what to apply next, and what they suggest is valid."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[3]


def _notes(helm: Any, chart_dir: Path, values: dict[str, Any]) -> str:
    result = helm.run(
        "install",
        "lt",
        str(chart_dir),
        "--namespace",
        "lt-system",
        "--dry-run=client",
        "--values",
        str(helm.values_file(values)),
    )
    assert result.returncode == 0, result.stderr
    notes: str = result.stdout.split("\nNOTES:\n", 1)[1]
    return notes


def _example(notes: str) -> dict[str, Any]:
    (block,) = re.findall(r"cat <<'YAML' \| kubectl apply -f -\n(.*?)\n\s*YAML\n", notes, re.S)
    example: dict[str, Any] = yaml.safe_load(block)
    return example


def test_the_notes_show_a_latencytarget_the_crd_accepts(helm: Any, chart_dir: Path) -> None:
    example = _example(_notes(helm, chart_dir, {}))
    (crd,) = [
        d for d in yaml.safe_load_all((REPO / "crds" / "latencytarget.yaml").read_text()) if d
    ]
    (version,) = crd["spec"]["versions"]
    assert example["apiVersion"] == f"{crd['spec']['group']}/{version['name']}"
    assert example["kind"] == crd["spec"]["names"]["kind"]
    schema = version["schema"]["openAPIV3Schema"]
    jsonschema.Draft4Validator(schema).validate(example)
    assert set(example["spec"]) <= set(schema["properties"]["spec"]["properties"])


def test_the_notes_say_how_to_watch_targets(helm: Any, chart_dir: Path) -> None:
    notes = _notes(helm, chart_dir, {})
    assert "kubectl get lt" in notes
    assert "rollout status deployment/lt-latency-tuner" in notes


def test_in_namespaced_mode_the_example_goes_to_a_watched_namespace(
    helm: Any, chart_dir: Path
) -> None:
    notes = _notes(helm, chart_dir, {"watchNamespaces": ["team-a", "team-b"]})
    assert _example(notes)["metadata"]["namespace"] == "team-a"
    assert "watching: team-a, team-b" in notes
