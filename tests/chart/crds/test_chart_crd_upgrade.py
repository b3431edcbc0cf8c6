"""The opt-in CRD upgrade path (``crds.upgrade``), as Argo CD's and KEDA's charts offer it:
off, the CRDs come only from crds/ (Helm installs them once); on, they are also templates, so
`helm upgrade` upgrades them, each exactly the repository's CRD, kept on uninstall unless
``crds.keep`` is off. Rendered and linted by real helm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from tests.chart.conftest import CHART, RELEASE, Helm

REPO = Path(__file__).resolve().parents[3]
KEEP = "helm.sh/resource-policy"


def repository_crds() -> dict[str, dict[str, Any]]:
    docs = [
        d for path in sorted((REPO / "crds").glob("*.yaml"))
        for d in yaml.safe_load_all(path.read_text()) if d
    ]  # fmt: skip
    return {d["metadata"]["name"]: d for d in docs}


def rendered_crds(helm: Helm, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    result = helm.template(values)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "CustomResourceDefinition"}


def without_keep(crd: dict[str, Any]) -> dict[str, Any]:
    annotations = dict(crd["metadata"].get("annotations") or {})
    annotations.pop(KEEP, None)
    metadata = {**crd["metadata"], "annotations": annotations}
    if not annotations:
        metadata.pop("annotations")
    return {**crd, "metadata": metadata}


def test_by_default_the_templates_hold_no_crd_and_helm_installs_them_from_crds_only(
    helm: Helm,
) -> None:
    assert rendered_crds(helm, {}) == {}
    result = helm.run("template", RELEASE, str(CHART), "--include-crds")
    assert result.returncode == 0, result.stderr
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(result.stdout)
             if d and d["kind"] == "CustomResourceDefinition"]  # fmt: skip
    assert sorted(names) == sorted(repository_crds())  # once each, from crds/


def test_with_crds_upgrade_each_crd_is_a_template_equal_to_the_repositorys_and_kept(
    helm: Helm,
) -> None:
    rendered = rendered_crds(helm, {"crds": {"upgrade": True}})
    expected = repository_crds()
    assert sorted(rendered) == sorted(expected)
    for name, crd in rendered.items():
        assert crd["metadata"]["annotations"][KEEP] == "keep"
        assert without_keep(crd) == expected[name]  # the schema survives the template


def test_crds_keep_off_lets_uninstall_delete_them(helm: Helm) -> None:
    rendered = rendered_crds(helm, {"crds": {"upgrade": True, "keep": False}})
    assert rendered
    assert all(KEEP not in (c["metadata"].get("annotations") or {}) for c in rendered.values())


def test_helm_lint_strict_accepts_the_upgrade_path(helm: Helm, tmp_path: Path) -> None:
    values = helm.values_file({"crds": {"upgrade": True}})
    result = helm.run("lint", "--strict", str(CHART), "--values", str(values))
    assert result.returncode == 0, result.stdout + result.stderr
