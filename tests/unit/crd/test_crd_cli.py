"""`latency-tuner crd` prints the CRD, and crds/latencytarget.yaml is exactly that output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from latency_tuner.api import build_crd
from latency_tuner.cli import main as latency_tuner
from latency_tuner.cli.crd import main

CRD_FILE = Path(__file__).resolve().parents[3] / "crds" / "latencytarget.yaml"


def test_the_committed_crd_is_byte_for_byte_what_the_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 0
    printed = capsys.readouterr().out
    assert printed.encode() == CRD_FILE.read_bytes(), (
        "crds/latencytarget.yaml is stale: run `latency-tuner crd > crds/latencytarget.yaml`"
    )


def test_the_top_level_command_dispatches_to_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert latency_tuner(["crd"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == build_crd()


def test_json_output_is_the_same_crd(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == build_crd()


def test_the_output_is_the_same_on_every_run(capsys: pytest.CaptureFixture[str]) -> None:
    main([])
    first = capsys.readouterr().out
    main([])
    assert capsys.readouterr().out == first


def test_an_unknown_output_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--output", "toml"])
    assert exited.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
