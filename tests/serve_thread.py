"""An aiohttp application served on 127.0.0.1: from a thread of its own for a test that calls it synchronously
(:func:`in_thread`), or on the test's own loop (:func:`on_loop`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from aiohttp import web

__all__ = ["in_thread", "on_loop"]


@contextmanager
def in_thread(app: web.Application) -> Iterator[str]:
    """Serve ``app`` on a free loopback port from a background loop; yield its base URL; clean it up after."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


@asynccontextmanager
async def on_loop(app: web.Application) -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port on the running loop; yield its base URL; clean it up after."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
