"""`latency-tuner diagnose --scrape` against a real simulated vLLM server: progress lines while
the window is sampled (never a silent window), and a no-data answer that names the selector."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.simulator.support import MODEL, Sim, running_sim
from tests.unit.diagnose.test_diagnose_observes_like_the_operator import write_deployment

from latency_tuner.cli.diagnose import EXIT_NO_DATA, main


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    with running_sim("serve", MODEL, "--sim-gpu", "H100-SXM") as server:
        yield server


def test_scraping_prints_progress_and_an_idle_server_names_the_selector_it_had_no_data_for(
    sim: Sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    container = {"name": "server", "image": "vllm/vllm-openai:v0.11.0", "args": [MODEL]}
    path = write_deployment(tmp_path, container)
    code = main(
        ["-n", "ml", "-d", "llama", "--deployment-file", str(path), "--ttft", "p90=500ms",
         "--scrape", f"{sim.url}/metrics", "--window", "3s", "--scrape-interval", "250ms"],
        environ={},
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == EXIT_NO_DATA, err
    progress = [line for line in err.splitlines() if "scraped" in line]
    assert err.splitlines()[0].startswith(
        "latency-tuner diagnose: scraping 1 pod(s) every 250ms for 3s"
    )
    assert len(progress) >= 3, err  # about every tenth of the window
    assert 'series {namespace="ml"} scraped from http://127.0.0.1:' in err
    assert "Traceback" not in err
