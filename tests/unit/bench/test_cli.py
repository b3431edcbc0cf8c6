from __future__ import annotations

import asyncio
import io
import json

import pytest
from tests.unit.bench.support import MODEL, FakeServer

from latency_tuner.cli import bench as cli
from latency_tuner.loadgen.report import ProgressLine
from latency_tuner.loadgen.results import Progress


def argv(server: FakeServer, *extra: str) -> list[str]:
    return [
        "--url", server.url, "--concurrency", "2", "--prompt-tokens", "16",
        "--output-tokens", "4", "--requests", "4", *extra,
    ]  # fmt: skip


async def test_json_output_is_one_object_with_the_stats_in_milliseconds(
    fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await asyncio.to_thread(cli.main, argv(fake_server, "--json"))
    out, err = capsys.readouterr()
    assert code == 0
    report = json.loads(out)
    assert report["model"] == MODEL
    assert (report["completed"], report["failed"], report["output_tokens"]) == (4, 0, 16)
    # The fake server answers its first token after 50 ms: at least 50 in milliseconds, and
    # far below the 50,000 a unit slip to microseconds would print (a loaded machine is slow,
    # not wrong, so the upper bound is loose).
    assert 50 <= report["ttft_ms"]["p50"] < 5_000
    assert set(report["itl_ms"]) >= {"mean", "p50", "p90", "p95", "p99"}
    assert "api_key" not in report["config"]
    assert err == ""  # stderr is not a TTY here: no progress line


async def test_the_text_report_has_a_row_per_latency_and_lists_errors(
    fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_server.fail_every = 2
    code = await asyncio.to_thread(cli.main, argv(fake_server, "--model", "m"))
    out, _ = capsys.readouterr()
    assert code == 1  # some requests failed
    for row in ("TTFT", "ITL", "TPOT", "E2E", "completed 2", "failed 2", "first errors:"):
        assert row in out
    assert "[500]" in out
    assert "injected failure" in out


def test_requests_and_duration_together_are_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--url", "http://x", "--concurrency", "1", "--prompt-tokens", "8",
                  "--output-tokens", "1", "--requests", "1", "--duration", "1"])  # fmt: skip
    assert exit_info.value.code == 2


def test_a_shared_prefix_as_long_as_the_prompt_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--url", "http://x", "--concurrency", "1", "--prompt-tokens", "8",
                  "--output-tokens", "1", "--shared-prefix-tokens", "8"])  # fmt: skip
    assert "shared_prefix_tokens" in capsys.readouterr().err


def test_an_unreachable_server_without_model_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--url", "http://127.0.0.1:9", "--concurrency", "1", "--prompt-tokens",
                     "8", "--output-tokens", "1", "--requests", "1", "--timeout", "2"])  # fmt: skip
    assert code == 2
    assert "cannot list models" in capsys.readouterr().err


def test_help_says_a_token_is_a_word() -> None:
    assert "one token = one whitespace-separated word" in " ".join(
        cli.build_parser().format_help().split()
    )


def test_the_progress_line_overwrites_itself_and_clears_at_the_end() -> None:
    stream = io.StringIO()
    line = ProgressLine(stream, hz=1e9)
    line(Progress(1.0, 3, 1, 2, 300, 0.05, 0.01))
    line(Progress(2.0, 6, 1, 2, 600, 0.05, 0.01))
    line.clear()
    text = stream.getvalue()
    assert text.count("\r") == 4
    assert "done 6" in text
    assert "TTFT 50.0ms" in text
    assert "300 tok/s" in text
    assert "\n" not in text
