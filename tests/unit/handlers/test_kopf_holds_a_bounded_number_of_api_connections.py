"""kopf's own requests go through a session that holds at most a set number of connections to
the API server (kopf's default has no limit), leaving room for one watch stream per watched
namespace and kind; requests beyond it wait and still complete."""

from __future__ import annotations

import asyncio

import kopf
from aiohttp import web

from latency_tuner.handlers.operator import (
    KOPF_REQUESTS,
    WATCH_STREAMS,
    bounded_session,
    kopf_connections,
)


def test_the_limit_leaves_watch_streams_room_for_every_watched_namespace() -> None:
    assert kopf_connections(()) == KOPF_REQUESTS + WATCH_STREAMS  # the whole cluster
    assert kopf_connections(("a", "b", "c")) == KOPF_REQUESTS + 3 * WATCH_STREAMS


async def test_a_slow_api_server_sees_no_more_connections_than_the_limit() -> None:
    open_now, most = 0, 0
    peers: set[object] = set()

    async def slow(request: web.Request) -> web.Response:
        nonlocal open_now, most
        open_now += 1
        most = max(most, open_now)
        assert request.transport is not None
        peers.add(request.transport.get_extra_info("peername"))
        await asyncio.sleep(0.05)
        open_now -= 1
        return web.json_response({"auth": request.headers.get("Authorization")})

    app = web.Application()
    app.router.add_get("/", slow)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    info = kopf.ConnectionInfo(server=f"http://127.0.0.1:{port}", token="t0k", insecure=True)
    context = bounded_session(info, info.as_ssl_context(), connections=5)
    try:
        assert context.server == info.server

        async def get() -> str:
            async with context.aiohttp_session.get(info.server + "/") as response:
                return str((await response.json())["auth"])

        answers = await asyncio.gather(*(get() for _ in range(60)))
    finally:
        await context.aiohttp_session.close()
        await runner.cleanup()
    assert answers == ["Bearer t0k"] * 60  # every request answered, with the credentials
    assert most == 5  # at most the limit in flight (and the limit reached: it waited)
    assert len(peers) <= 5  # ... over at most that many connections, reused
