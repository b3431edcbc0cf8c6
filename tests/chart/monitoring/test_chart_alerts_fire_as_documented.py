"""The chart's alerts fire when they should and stay quiet otherwise, checked by promtool.

`promtool test rules` (Debian's prometheus package ships it) evaluates the rendered
PrometheusRule's groups over synthetic series. Each alert is tested firing and not firing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]
JOB = "lt-latency-tuner"  # the ServiceMonitor's job: the Service's name


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("promtool is missing in CI: scripts/setup.sh installs prometheus")
        pytest.skip("promtool not found (Debian's prometheus package ships it)")
    return found


def rules(render: Render) -> dict[str, Any]:
    (rule,) = [m for m in render("everything-on") if m["kind"] == "PrometheusRule"]
    groups: dict[str, Any] = {"groups": rule["spec"]["groups"]}
    return groups


def expanded_annotations(render: Render, alert: str, labels: dict[str, str]) -> dict[str, str]:
    """The alert's annotations with `{{ $labels.x }}` filled in, as Prometheus expands them."""
    (rule,) = [r for g in rules(render)["groups"] for r in g["rules"] if r.get("alert") == alert]
    return {
        key: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
        for key, text in rule["annotations"].items()
    }


def run_promtool(tmp_path: Path, render: Render, tests: list[dict[str, Any]]) -> str:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules(render)))
    spec = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(spec))
    result = subprocess.run(
        [promtool(), "test", "rules", "tests.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_rules_pass_promtools_own_checks(tmp_path: Path, render: Render) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules(render)))
    result = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 5 rules found" in result.stdout


def test_a_target_missed_for_thirty_minutes_alerts_and_names_the_latency_target(
    tmp_path: Path, render: Render
) -> None:
    labels = {"namespace": "llm", "name": "chat", "severity": "warning"}
    run_promtool(
        tmp_path,
        render,
        [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": 'latency_tuner_targets_met{namespace="llm",name="chat"}',
                        "values": "0x45",
                    },
                    {
                        "series": 'latency_tuner_targets_met{namespace="llm",name="fine"}',
                        "values": "1x45",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": "29m", "alertname": "LatencyTargetNotMet", "exp_alerts": []},
                    {
                        "eval_time": "31m",
                        "alertname": "LatencyTargetNotMet",
                        "exp_alerts": [
                            {
                                "exp_labels": labels,
                                "exp_annotations": expanded_annotations(
                                    render, "LatencyTargetNotMet", labels
                                ),
                            }
                        ],
                    },
                ],
            }
        ],
    )


def test_a_target_failed_for_fifteen_minutes_alerts_and_names_it(
    tmp_path: Path, render: Render
) -> None:
    labels = {"namespace": "llm", "name": "orphan", "phase": "Failed", "severity": "warning"}
    phase = 'latency_tuner_target_phase{{namespace="llm",name="{name}",phase="{phase}"}}'
    run_promtool(
        tmp_path,
        render,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": phase.format(name="orphan", phase="Failed"), "values": "1x30"},
                    {"series": phase.format(name="orphan", phase="Observing"), "values": "0x30"},
                    # Failed a moment, then back at work: no alert.
                    {"series": phase.format(name="blip", phase="Failed"), "values": "1x5 0x25"},
                    {"series": phase.format(name="blip", phase="Observing"), "values": "0x5 1x25"},
                ],
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": "LatencyTargetFailed", "exp_alerts": []},
                    {
                        "eval_time": "20m",
                        "alertname": "LatencyTargetFailed",
                        "exp_alerts": [
                            {
                                "exp_labels": labels,
                                "exp_annotations": expanded_annotations(
                                    render, "LatencyTargetFailed", labels
                                ),
                            }
                        ],
                    },
                ],
            }
        ],
    )


def test_frequent_rollbacks_alert_and_a_few_do_not(tmp_path: Path, render: Render) -> None:
    labels = {"namespace": "llm", "severity": "warning"}
    run_promtool(
        tmp_path,
        render,
        [
            {
                "interval": "1m",
                # five rollbacks of two targets of one namespace in the first hour, then none.
                "input_series": [
                    {
                        "series": 'latency_tuner_rollbacks_total{namespace="llm",name="chat"}',
                        "values": "0+0.05x60 3x120",
                    },
                    {
                        "series": 'latency_tuner_rollbacks_total{namespace="llm",name="rag"}',
                        "values": "0+0.0333333x60 2x120",
                    },
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "60m",
                        "alertname": "LatencyTunerRollingBackOften",
                        "exp_alerts": [
                            {
                                "exp_labels": labels,
                                "exp_annotations": expanded_annotations(
                                    render, "LatencyTunerRollingBackOften", labels
                                ),
                            }
                        ],
                    },
                    {
                        "eval_time": "170m",
                        "alertname": "LatencyTunerRollingBackOften",
                        "exp_alerts": [],
                    },
                ],
            }
        ],
    )


def test_reconcile_errors_for_fifteen_minutes_alert_by_target_and_kind(
    tmp_path: Path, render: Render
) -> None:
    labels = {"namespace": "llm", "name": "chat", "kind": "kubernetes", "severity": "warning"}
    errors = 'latency_tuner_reconcile_errors_total{namespace="llm",name="chat",kind="kubernetes"}'
    run_promtool(
        tmp_path,
        render,
        [
            {
                "interval": "1m",
                "input_series": [{"series": errors, "values": "0+1x40"}],
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": "LatencyTunerReconcileErrors",
                        "exp_alerts": [],
                    },
                    {
                        "eval_time": "30m",
                        "alertname": "LatencyTunerReconcileErrors",
                        "exp_alerts": [
                            {
                                "exp_labels": labels,
                                "exp_annotations": expanded_annotations(
                                    render, "LatencyTunerReconcileErrors", labels
                                ),
                            }
                        ],
                    },
                ],
            }
        ],
    )


def test_an_operator_down_for_ten_minutes_alerts_and_one_up_does_not(
    tmp_path: Path, render: Render
) -> None:
    labels = {"severity": "warning"}
    down = {
        "interval": "1m",
        "input_series": [
            {"series": f'up{{job="{JOB}",pod="lt-latency-tuner-1"}}', "values": "1x5 0x30"}
        ],
        "alert_rule_test": [
            {"eval_time": "8m", "alertname": "LatencyTunerDown", "exp_alerts": []},
            {
                "eval_time": "20m",
                "alertname": "LatencyTunerDown",
                "exp_alerts": [
                    {
                        "exp_labels": labels,
                        "exp_annotations": expanded_annotations(render, "LatencyTunerDown", labels),
                    }
                ],
            },
        ],
    }
    up = {
        "interval": "1m",
        "input_series": [
            {"series": f'up{{job="{JOB}",pod="lt-latency-tuner-1"}}', "values": "0x30"},
            {"series": f'up{{job="lt-system/{JOB}",pod="lt-latency-tuner-2"}}', "values": "1x30"},
        ],
        "alert_rule_test": [
            {"eval_time": "25m", "alertname": "LatencyTunerDown", "exp_alerts": []}
        ],
    }
    run_promtool(tmp_path, render, [down, up])


def test_alerts_without_a_monitor_are_refused_with_the_reason(helm: Any) -> None:
    result = helm.template({"prometheusRule": {"enabled": True}})
    assert result.returncode != 0
    assert "needs serviceMonitor.enabled or podMonitor.enabled" in result.stderr
