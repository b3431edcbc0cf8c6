"""The quality gate end to end below the operator: real simulator processes answer the same
prompts at temperature 0, the answers are collected over HTTP and judged by ``core.quality``.
Hostile endpoints (the pods are the tenant's) yield no answer, never a hang or a flood."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web
from tests.integration.simulator.support import MODEL, Sim, running_sim

from latency_tuner.adapters.inference import Answers, collect_answers
from latency_tuner.adapters.inference.answers import MAX_ANSWER_BYTES
from latency_tuner.core.quality import Metric, judge_against_reference

# The index last: the simulator picks output words from the prompt's length and last words.
PROMPTS = [f"Summarise the handbook in plain words, chapter {i}" for i in range(30)]
BASE = ["serve", MODEL, "--max-model-len", "4096", "--sim-gpu", "H100-SXM"]


@pytest.fixture(scope="module")
def baseline() -> Iterator[Sim]:
    with running_sim(*BASE) as server:
        yield server


def _answers(sim: Sim) -> Answers:
    return asyncio.run(collect_answers(sim.url, MODEL, PROMPTS, max_tokens=64))


def test_two_16_bit_pods_give_identical_answers_and_pass_a_tight_gate(baseline: Sim) -> None:
    with running_sim(*BASE) as twin:
        first, second = _answers(baseline), _answers(twin)
    assert first.errors == []
    assert second.errors == []
    assert all(first.texts)
    verdict = judge_against_reference(Metric.EXACT_MATCH, first.texts, second.texts, 0.0)
    assert verdict.passed, verdict.reason
    assert verdict.samples == len(PROMPTS)


def test_fp8_weights_drift_by_about_two_percent_of_words(baseline: Sim) -> None:
    with running_sim(*BASE, "--quantization", "fp8") as lossy:
        reference, candidate = _answers(baseline), _answers(lossy)
    tight = judge_against_reference(Metric.SIMILARITY, reference.texts, candidate.texts, 0.005)
    loose = judge_against_reference(Metric.SIMILARITY, reference.texts, candidate.texts, 0.05)
    assert not tight.passed, tight.reason
    assert loose.passed, loose.reason
    assert tight.candidate_score == pytest.approx(0.98, abs=0.015)
    exact = judge_against_reference(Metric.EXACT_MATCH, reference.texts, candidate.texts, 0.1)
    assert not exact.passed  # most 64-word answers have at least one changed word


def test_a_heavily_altered_pod_fails_even_a_generous_gate(baseline: Sim) -> None:
    with running_sim(*BASE, "--sim-altered-share", "0.3") as lossy:
        reference, candidate = _answers(baseline), _answers(lossy)
    verdict = judge_against_reference(Metric.SIMILARITY, reference.texts, candidate.texts, 0.15)
    assert not verdict.passed
    assert "more than the 0.150 tolerance" in verdict.reason


class Hostile:
    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        self.url = ""

    async def endless(self, request: web.Request) -> web.StreamResponse:
        self.headers.append(dict(request.headers))
        response = web.StreamResponse()
        await response.prepare(request)
        chunk = b"x" * 65536
        while True:  # the client must stop reading, not the server writing
            await response.write(chunk)

    async def silent(self, request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def redirect(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("http://127.0.0.1:9/steal")


@pytest.fixture
async def hostile() -> AsyncIterator[Hostile]:
    server = Hostile()
    app = web.Application()
    app.router.add_post("/endless/v1/completions", server.endless)
    app.router.add_post("/silent/v1/completions", server.silent)
    app.router.add_post("/redirect/v1/completions", server.redirect)
    runner = web.AppRunner(app, shutdown_timeout=0.5)  # the silent handler never returns
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.url = f"http://127.0.0.1:{port}"
    yield server
    await runner.cleanup()


async def test_an_endless_body_is_cut_at_the_cap_and_gives_no_answer(hostile: Hostile) -> None:
    got = await collect_answers(f"{hostile.url}/endless", MODEL, PROMPTS[:2], request_timeout=20)
    assert got.texts == [None, None]
    assert all(f"larger than {MAX_ANSWER_BYTES} bytes" in e for e in got.errors)
    assert all("authorization" not in {k.lower() for k in h} for h in hostile.headers)


async def test_a_pod_that_never_answers_is_given_up_on_at_its_timeout(hostile: Hostile) -> None:
    loop = asyncio.get_running_loop()
    began = loop.time()
    got = await collect_answers(f"{hostile.url}/silent", MODEL, PROMPTS[:3], request_timeout=1)
    assert got.texts == [None, None, None]
    assert loop.time() - began < 30  # bounded by the timeout, not by the pod
    assert "no answer within 1s" in got.errors[0]


async def test_a_redirect_is_not_followed(hostile: Hostile) -> None:
    got = await collect_answers(f"{hostile.url}/redirect", MODEL, PROMPTS[:1])
    assert got.texts == [None]
    assert "HTTP 302" in got.errors[0]


async def test_the_deadline_bounds_all_prompts_together(hostile: Hostile) -> None:
    got = await collect_answers(
        f"{hostile.url}/silent", MODEL, PROMPTS[:8], request_timeout=60, deadline=1.5
    )
    assert got.texts == [None] * 8
    assert "8 prompts unanswered after the 1.5s deadline" in got.errors[-1]
