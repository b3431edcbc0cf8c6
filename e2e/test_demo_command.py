"""`latency-tuner demo` as a newcomer runs it: kubectl against a kept sandbox, and Ctrl-C or
SIGTERM ending it cleanly (a report written, no process left behind, no traceback)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.sandbox.support import alive

pytestmark = pytest.mark.e2e
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def descendants(root: int) -> set[int]:
    """Every live process below ``root``, from /proc (children of children included)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


class Demo:
    """The demo command as a child process, its output read line by line."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.report = tmp_path / "report"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "latency_tuner.cli",
                "demo",
                "--report",
                str(self.report),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=tmp_path,
        )
        self.lines: list[str] = []
        self.seen: set[int] = set()

    def until(self, text: str, within: float) -> str:
        """Read output until a line containing ``text``; remember the processes started."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            self.seen |= descendants(self.process.pid)
            if text in line:
                return line
        raise AssertionError(f"no {text!r} in the demo's output:\n{''.join(self.lines)}")

    def end(self, number: int) -> int:
        self.seen |= descendants(self.process.pid)
        self.process.send_signal(number)
        out, _ = self.process.communicate(timeout=120)
        self.lines.append(out)
        return self.process.returncode

    @property
    def output(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def demos(tmp_path: Path) -> Iterator[list[Demo]]:
    started: list[Demo] = []
    yield started
    for demo in started:
        if demo.process.poll() is None:
            demo.process.kill()


def test_a_kept_sandbox_answers_kubectl_with_the_readme_columns_until_sigterm(
    tmp_path: Path, demos: list[Demo]
) -> None:
    demo = Demo(tmp_path, "--keep", "--no-prometheus")
    demos.append(demo)
    export = demo.until("export KUBECONFIG=", within=400)
    kubeconfig = export.split("=", 1)[1].strip()
    get_line = demo.until("kubectl get latencytargets -n", within=10)
    namespace = get_line.split()[-1]
    table = subprocess.run(
        [
            KUBECTL,
            f"--kubeconfig={kubeconfig}",
            f"--cache-dir={tmp_path / 'cache'}",
            "get",
            "latencytargets",
            "-n",
            namespace,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()
    assert table[0].split() == ["NAME", "TTFT", "ITL", "MET", "PHASE", "TRIALS", "AGE"]
    assert "Converged" in table[1].split()
    assert demo.seen, "the demo started no processes"

    assert demo.end(signal.SIGTERM) == 0  # --keep ended as asked, expectations held
    assert "Traceback" not in demo.output
    assert (demo.report / "report.md").is_file()
    assert not [pid for pid in demo.seen if alive(pid)], "processes left behind"


def test_ctrl_c_mid_run_writes_a_partial_report_and_leaves_nothing_running(
    tmp_path: Path, demos: list[Demo]
) -> None:
    demo = Demo(tmp_path, "--no-prometheus")
    demos.append(demo)
    demo.until("sandbox ready", within=120)
    assert demo.end(signal.SIGINT) == 128 + signal.SIGINT
    assert "Traceback" not in demo.output
    report = (demo.report / "report.md").read_text()
    assert "interrupted after" in report
    assert "partial report" in report
    assert not [pid for pid in demo.seen if alive(pid)], "processes left behind"
    assert os.path.isfile(demo.report / "result.json")
