"""scripts/install-helm.sh is idempotent: with helm in place it changes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HELM = REPO / ".tools" / "bin" / "helm"


def test_a_second_run_keeps_the_installed_helm() -> None:
    if not HELM.is_file():
        pytest.skip("helm is not installed in .tools/bin (run scripts/install-helm.sh)")
    before = HELM.stat().st_mtime_ns
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "install-helm.sh")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "already installed" in result.stdout
    assert HELM.stat().st_mtime_ns == before
