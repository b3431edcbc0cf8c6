"""The source folder is named `operator`; it must never shadow the standard library."""

from __future__ import annotations

import importlib.util
import operator
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def test_the_source_folder_has_no_init_module() -> None:
    assert not (REPO / "operator" / "__init__.py").exists()


def test_import_operator_is_still_the_standard_library() -> None:
    assert operator.add(2, 3) == 5
    spec = importlib.util.find_spec("operator")
    assert spec is not None
    assert spec.origin is not None
    assert "site-packages" not in spec.origin
    assert not spec.origin.startswith(str(REPO / "operator"))


def test_import_operator_from_the_repository_root_is_still_the_standard_library() -> None:
    # Run from the repo root, where a stray operator/__init__.py would win the import.
    code = "import operator, sys; print(operator.add(2, 3), operator.__spec__.origin)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "5"
    assert not out[1].startswith(str(REPO / "operator"))


def test_the_console_script_lists_its_commands() -> None:
    from latency_tuner.cli import SUBCOMMANDS, main

    assert main(["--help"]) == 0
    assert {"crd", "sim", "bench", "diagnose", "run", "demo"} <= set(SUBCOMMANDS)


def test_an_unknown_command_is_refused_with_a_usage_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from latency_tuner.cli import main

    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'frobnicate'" in err
    assert "usage: latency-tuner COMMAND" in err
