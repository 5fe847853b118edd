"""Serving an aiohttp app on 127.0.0.1 for the dev servers (replay upstream, fake Devin,
CPA stand-in): start on a port (0 = a free one), print where, run until Ctrl-C/SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import web


async def start_app(
    app: web.Application, host: str = "127.0.0.1", port: int = 0, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, int]:
    """Start ``app``; returns its runner (``await runner.cleanup()`` stops it) and port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    sock = site._server.sockets[0]  # type: ignore[union-attr]
    return runner, sock.getsockname()[1]


def serve_forever(start: Callable[[], Awaitable[tuple[web.AppRunner, int]]], banner: str) -> int:
    """Run ``start()``, print ``banner.format(port=...)`` (tests read it), wait for a signal."""

    async def run() -> None:
        runner, port = await start()
        print(banner.format(port=port), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(run())
    return 0
