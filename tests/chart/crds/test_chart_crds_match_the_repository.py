"""The chart ships exactly the repository's CRDs, byte for byte (scripts/sync-chart-crds.sh)."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "crds"
CHART_CRDS = REPO / "charts" / "latency-tuner" / "crds"
HINT = "run scripts/sync-chart-crds.sh"


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.yaml"))


def test_the_latencytarget_and_kopf_peering_crds_exist() -> None:
    assert (SOURCE / "latencytarget.yaml").is_file()
    assert (SOURCE / "peering.yaml").is_file()


def test_the_chart_holds_a_copy_of_each_crd_and_nothing_else() -> None:
    assert _names(CHART_CRDS) == _names(SOURCE), HINT


@pytest.mark.parametrize("name", _names(SOURCE))
def test_each_chart_copy_has_the_same_bytes(name: str) -> None:
    assert (CHART_CRDS / name).read_bytes() == (SOURCE / name).read_bytes(), HINT


@pytest.mark.parametrize("name", _names(SOURCE))
def test_each_crd_file_is_a_strictly_valid_custom_resource_definition(name: str) -> None:
    docs = [d for d in yaml.safe_load_all((SOURCE / name).read_text()) if d]
    assert docs
    for doc in docs:
        assert doc["kind"] == "CustomResourceDefinition"
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_peering_crds_are_kopfs_own() -> None:
    """kopf looks for exactly these group/plural/scope triples when peering."""
    docs = list(yaml.safe_load_all((SOURCE / "peering.yaml").read_text()))
    found = {(d["spec"]["group"], d["spec"]["names"]["plural"], d["spec"]["scope"]) for d in docs}
    assert found == {
        ("kopf.dev", "clusterkopfpeerings", "Cluster"),
        ("kopf.dev", "kopfpeerings", "Namespaced"),
    }
