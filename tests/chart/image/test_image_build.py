"""The image: what can be checked without a Docker daemon.

The wheel is built from exactly the files the build context admits (.dockerignore) with the
same command the Dockerfile's build stage runs, and the runtime stage's user, entrypoint and
command agree with the chart.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = (REPO / "Dockerfile").read_text()


def _admitted(relative: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-admits."""
    admitted = True
    for pattern in patterns:
        negated = pattern.startswith("!")
        body = pattern[1:] if negated else pattern
        body = body.rstrip("/")
        if fnmatch.fnmatch(relative, body) or relative.startswith(f"{body}/"):
            admitted = negated
    return admitted


def _context(destination: Path) -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for root, _, files in os.walk(REPO):
        if any(part in {".git", ".venv", ".tools", "node_modules"} for part in Path(root).parts):
            continue
        for name in files:
            source = Path(root) / name
            relative = source.relative_to(REPO).as_posix()
            if _admitted(relative, patterns):
                target = destination / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


def test_the_build_context_leaves_out_the_venv_tests_and_git() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for path in [".venv/bin/python", ".git/HEAD", "tests/chart/conftest.py", ".tools/bin/helm"]:
        assert not _admitted(path, patterns), path
    for path in ["pyproject.toml", "README.md", "operator/latency_tuner/cli.py"]:
        assert _admitted(path, patterns), path


def test_the_wheel_builds_from_the_build_context_alone(tmp_path: Path) -> None:
    context = tmp_path / "context"
    _context(context)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(tmp_path / "dist"),
            str(context),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "dist").glob("latency_tuner-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "latency_tuner/cli/__init__.py" in names
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert "latency-tuner = latency_tuner.cli:main" in archive.read(entry_points).decode()


def test_the_runtime_stage_runs_the_operator_as_the_charts_user() -> None:
    runtime = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    assert runtime.startswith("${PYTHON_IMAGE}")
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in DOCKERFILE
    assert "USER 65532:65532" in runtime
    assert "--uid 65532" in runtime  # a passwd entry: getpass (kopf) fails on unknown uids
    assert 'ENTRYPOINT ["latency-tuner"]' in runtime
    assert 'CMD ["run"]' in runtime
    assert "COPY --from=build /opt/venv /opt/venv" in runtime
