"""A worker's private loopback endpoint beside its siblings', and the client that reaches theirs.

With ``serve --workers N`` the kernel hands each connection to any one worker, so what one worker
holds alone (its own metric series, a trace it has not delivered yet) is asked of it by the others,
on a port ``serve`` gave each worker (127.0.0.1, told to no one else). :class:`WorkerPeers` is that
port's lifecycle for one purpose: it listens with the routes it is given while the application
runs, and keeps the HTTP session its siblings are reached with. A port already taken is logged,
not fatal: the siblings then go without this worker's answers, as they go without a worker that is
down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import aiohttp
from aiohttp import web

__all__ = ["WorkerPeers"]

log = logging.getLogger(__name__)


class WorkerPeers:
    """This worker's private endpoint and its siblings' addresses.

    Args:
        worker: This worker's number (an index into ``ports``).
        ports: Every worker's private port for this purpose, by worker number, all on ``host``.
        what: What the endpoint serves, for the log line of a port it cannot take ("its series").
        timeout_s: How long a call to a sibling may take.
        host: Where the private endpoints listen.
    """

    def __init__(self, worker: int, ports: Sequence[int], *, what: str, timeout_s: float,
                 host: str = "127.0.0.1") -> None:
        self.worker, self.ports, self.host = worker, list(ports), host
        self._what = what
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.session: aiohttp.ClientSession | None = None  # open between start() and close()
        self._runner: web.AppRunner | None = None

    @property
    def others(self) -> list[int]:
        """The siblings' worker numbers."""
        return [w for w in range(len(self.ports)) if w != self.worker]

    def url(self, worker: int, path: str) -> str:
        """``path`` on ``worker``'s private endpoint."""
        return f"http://{self.host}:{self.ports[worker]}{path}"

    def mount(self, app: web.Application, routes: Callable[[web.Application], object]) -> None:
        """Listen with ``routes`` (added to the private application) while ``app`` runs."""
        app.on_startup.append(lambda _: self.start(routes))
        app.on_cleanup.append(lambda _: self.close())

    async def start(self, routes: Callable[[web.Application], object]) -> None:
        """Open the client, and listen on this worker's port with ``routes``."""
        self.session = aiohttp.ClientSession(timeout=self._timeout)
        private = web.Application()
        routes(private)
        runner = web.AppRunner(private, access_log=None, handle_signals=False)
        await runner.setup()
        port = self.ports[self.worker]
        try:
            await web.TCPSite(runner, self.host, port).start()
        except OSError as exc:
            await runner.cleanup()
            log.warning("worker %d cannot serve %s on %s:%d (%s): its siblings go without them",
                        self.worker, self._what, self.host, port, exc)
            return
        self._runner = runner

    async def close(self) -> None:
        """Stop the endpoint and the client."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.session is not None:
            await self.session.close()
            self.session = None
