"""`latency-tuner diagnose` as a user types it: `run`'s flag names and environment, a manifest
that names the Deployment, one clear line instead of a traceback, no "None" in a recommendation.

Prometheus is a closed port here: reaching it (exit 5, its URL in the message) proves every
flag and file before it was accepted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.unit.core.builders import prefill_stalls
from tests.unit.diagnose.test_diagnose_observes_like_the_operator import (
    UNREACHABLE,
    VLLM,
    write_deployment,
)
from tests.unit.rollout.test_rollout_phases import H100, config, facts, spec, window
from tests.unit.rollout.test_rollout_refines_for_margin_once_targets_are_met import UNCHUNKED

from latency_tuner.cli import diagnose
from latency_tuner.cli.diagnose import EXIT_UNREACHABLE, EXIT_USAGE, main
from latency_tuner.core.knobs.base import Change
from latency_tuner.core.rollout import analyse, propose
from latency_tuner.settings import parser as run_parser
from latency_tuner.vllm.args import VllmCommandLine

OBJECTIVE = ("--ttft", "p90=500ms")


def run(argv: list[str], environ: dict[str, str] | None = None) -> int:
    return main(argv, environ={} if environ is None else environ)


def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "target.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "tuning.latencytuner.io/v1alpha1",
                "kind": "LatencyTarget",
                "metadata": {"name": "llama", "namespace": "ml"},
                "spec": {
                    "targetRef": {"name": "llama", "container": "server"},
                    "objectives": {"ttft": {"percentile": 90, "threshold": "500ms"}},
                },
            }
        )
    )
    return path


def test_without_a_kubeconfig_the_error_is_one_line_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # not in a pod
    for where in ([], ["--kubeconfig", str(tmp_path / "missing")]):
        code = run(["-n", "ml", "-d", "llama", "--prometheus-url", UNREACHABLE, *OBJECTIVE, *where])
        err = capsys.readouterr().err
        assert code == EXIT_USAGE
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err
        assert "no usable kubeconfig" in err
        assert "--deployment-file" in err


def test_the_flags_shared_with_run_have_runs_names(capsys: pytest.CaptureFixture[str]) -> None:
    run_flags = {a for action in run_parser()._actions for a in action.option_strings}
    with pytest.raises(SystemExit):
        diagnose.parser().parse_args(["--help"])
    help_text = capsys.readouterr().out
    for flag in ("--prometheus-url", "--prometheus-bearer-token-file", "--prometheus-ca-file"):
        assert flag in run_flags
        assert flag in help_text
    assert "--kubeconfig" in run_flags
    assert "--kubeconfig" in help_text
    for old in ("--prometheus ", "--bearer-token-file", "--ca-file"):
        assert old not in help_text  # kept as hidden aliases only


@pytest.mark.parametrize("flag", ["--prometheus-url", "--prometheus"])
def test_the_new_flag_and_its_old_alias_both_reach_prometheus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    path = write_deployment(tmp_path, VLLM)
    argv = ["-n", "ml", "-d", "llama", "--deployment-file", str(path), flag, UNREACHABLE]
    assert run([*argv, *OBJECTIVE]) == EXIT_UNREACHABLE
    assert "127.0.0.1:9" in capsys.readouterr().err


def test_lt_prometheus_url_is_honoured_as_by_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_deployment(tmp_path, VLLM)
    argv = ["-n", "ml", "-d", "llama", "--deployment-file", str(path), *OBJECTIVE]
    assert run(argv, {"LT_PROMETHEUS_URL": UNREACHABLE}) == EXIT_UNREACHABLE
    assert "127.0.0.1:9" in capsys.readouterr().err
    assert run(argv) == EXIT_USAGE  # and without it, the error says how to give one
    assert "LT_PROMETHEUS_URL" in capsys.readouterr().err


def test_a_manifest_names_the_namespace_and_the_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_deployment(tmp_path, VLLM)
    argv = ["--manifest", str(manifest(tmp_path)), "--deployment-file", str(path)]
    assert run([*argv, "--prometheus-url", UNREACHABLE]) == EXIT_UNREACHABLE
    assert "127.0.0.1:9" in capsys.readouterr().err


def test_without_a_manifest_the_namespace_and_deployment_are_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["--prometheus-url", UNREACHABLE, *OBJECTIVE]) == EXIT_USAGE
    assert "give -n and -d" in capsys.readouterr().err


def test_a_recommendation_for_an_absent_flag_has_no_none_in_it() -> None:
    # The container sets no --max-num-batched-tokens: the change starts from vLLM's default.
    target = spec()
    command_line = VllmCommandLine.parse(None, ["meta-llama/Llama-3.1-8B-Instruct"])
    observation = window(config(16))  # requests queue
    analysis = analyse(target, observation, command_line, H100)
    proposal = propose(target, analysis.diagnosis, observation, command_line, H100)
    assert isinstance(proposal, Change)
    assert proposal.from_value is None
    printed = diagnose.recommendation_of(proposal, [])
    assert printed["from"] is None  # JSON keeps null for "absent"
    text = diagnose.render_text(observation, analysis.diagnosis, printed)
    line = text.split("Recommendation:", 1)[1].splitlines()[0]
    assert "None" not in line
    assert f"{proposal.from_effective} -> {proposal.to_value}" in line


def test_with_the_targets_met_the_recommendation_is_the_change_for_margin() -> None:
    # ITL p99 136 ms meets 150 ms; the operator would still try chunked prefill for margin.
    current = prefill_stalls(window_seconds=60.0, requests=180)
    ready = facts(UNCHUNKED, current=current)
    target = spec(objectives={"itl": {"percentile": 99, "threshold": "150ms"}})
    analysis = analyse(target, current, ready.command_line, H100)
    printed = diagnose.recommend(analysis, ready, target)
    assert printed is not None
    assert printed["knob"] == "chunkedPrefill"
    assert printed["reason"].startswith("targets met; for margin")
    assert "Recommendation: chunkedPrefill false -> true" in diagnose.render_text(
        current, analysis.diagnosis, printed
    )
    recommend_only = spec(
        objectives={"itl": {"percentile": 99, "threshold": "150ms"}}, mode="Recommend"
    )
    assert diagnose.recommend(analysis, ready, recommend_only) is None
