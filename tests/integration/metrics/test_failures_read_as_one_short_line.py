"""A metrics source that fails says why in one short line a person can act on — never a web
page, a bytes repr or httpx's multi-line text — over real HTTP on 127.0.0.1."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator

import pytest

from latency_tuner.adapters.metrics import QueryFailed
from latency_tuner.adapters.metrics.prometheus import PrometheusSettings, PrometheusSource
from latency_tuner.adapters.metrics.scrape import ScrapeSource, ScrapeTarget
from latency_tuner.core.promql import LabelMatcher

PAGE = b"<html><body>\n<h1>Welcome</h1>\n<p>this is not Prometheus</p>\n</body></html>\n"


def serving(status: int) -> type[http.server.BaseHTTPRequestHandler]:
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, *_: object) -> None:
            pass

    return Page


@contextlib.contextmanager
def page_server(status: int) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), serving(status))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


@pytest.fixture(params=[404, 503, 200], ids=["not-found", "unavailable", "a-web-page"])
def web_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    with page_server(request.param) as url:
        yield url, request.param


async def test_a_prometheus_url_that_is_a_web_server_says_so(web_server: tuple[str, int]) -> None:
    url, status = web_server
    source = PrometheusSource(PrometheusSettings(url=url))
    try:
        with pytest.raises(QueryFailed) as caught:
            await source.observe(
                matchers=[LabelMatcher("namespace", "=", "llm")], window_seconds=60
            )
    finally:
        source.close()
    message = str(caught.value)
    assert (
        message
        == {
            404: f"Prometheus at {url} answered with an error: HTTP 404: not found (is the URL a "
            "Prometheus server, with its path prefix?)",
            503: f"Prometheus at {url} answered with an error: HTTP 503: unavailable (Prometheus "
            "starting or stopping, or a proxy with no server behind it)",
            200: f"{url} answered with something that is not Prometheus' JSON API: is it the URL "
            "of a Prometheus server?",
        }[status]
    )


async def test_a_pod_that_answers_its_metrics_path_with_an_error_reads_as_the_status() -> None:
    with page_server(404) as url:
        source = ScrapeSource(lambda: [ScrapeTarget(f"{url}/metrics", {"namespace": "llm"})])
        try:
            assert await source.scrape_once() == 0
        finally:
            await source.aclose()
    assert source.last_errors == {f"{url}/metrics": "HTTP 404"}
