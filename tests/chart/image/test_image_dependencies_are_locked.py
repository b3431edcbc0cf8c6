"""The image installs its dependencies from requirements.lock: exact versions with hashes.

Checked without a Docker daemon or a network: the lock pins every runtime dependency of
pyproject.toml at a version its range admits, every pinned file carries a sha256, and the
Dockerfile installs the lock with --require-hashes and the project itself with --no-deps (so
nothing outside the lock is ever resolved at build time).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[3]
LOCK = REPO / "requirements.lock"
DOCKERFILE = (REPO / "Dockerfile").read_text()


def locked() -> dict[str, tuple[Version, list[str]]]:
    """name -> (version, hashes) of every entry in the lock."""
    entries: dict[str, tuple[Version, list[str]]] = {}
    text = LOCK.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        head, *options = line.split()
        name, _, version = head.partition("==")
        assert version, f"{head} is not pinned with =="
        hashes = [o.removeprefix("--hash=sha256:") for o in options if o.startswith("--hash=")]
        entries[canonicalize_name(name)] = (Version(version), hashes)
    return entries


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def test_every_runtime_dependency_is_pinned_at_a_version_its_range_admits() -> None:
    entries = locked()
    for requirement in runtime_requirements():
        name = canonicalize_name(requirement.name)
        assert name in entries, f"{name} is missing from requirements.lock"
        version, _ = entries[name]
        assert requirement.specifier.contains(version), f"{name}=={version} vs {requirement}"


def test_every_pinned_file_carries_a_sha256() -> None:
    for name, (_, hashes) in locked().items():
        assert hashes, f"{name} has no --hash"
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), name


def test_the_lock_holds_no_test_or_benchmark_tooling() -> None:
    assert not {"pytest", "optuna", "matplotlib", "kmock", "mypy", "ruff"} & set(locked())


def test_the_dockerfile_installs_the_lock_with_hashes_and_the_project_without_resolving() -> None:
    assert "COPY requirements.lock" in DOCKERFILE
    assert "--require-hashes" in DOCKERFILE
    assert "-r requirements.lock" in DOCKERFILE
    installs = re.findall(r"pip install[^\n]*", DOCKERFILE)
    assert installs, "the Dockerfile installs nothing"
    assert all("--no-deps" in line or "--require-hashes" in line for line in installs), installs
    assert re.search(r"pip install --no-deps /dist/\*\.whl", DOCKERFILE)


def test_the_base_image_is_a_build_argument_pinnable_by_digest() -> None:
    (default,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, flags=re.M)
    assert default.startswith("python:3.11")
    assert DOCKERFILE.count("FROM ${PYTHON_IMAGE}") == 2  # build and runtime share one base
