"""``latency-tuner benchmark strategies`` refuses what cannot compare the strategies before it
runs anything: one replica (a canary needs two), an unknown strategy or world."""

from __future__ import annotations

import pytest

from latency_tuner.cli.benchmark import main


@pytest.mark.parametrize(
    "argv",
    [
        ["strategies", "--replicas", "1"],
        ["strategies", "--strategies", "rollout,bluegreen"],
        ["strategies", "--worlds", "moon"],
        ["strategies", "--scenario", "no-such-scenario"],
    ],
)
def test_the_strategies_command_refuses_what_cannot_be_compared(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err
