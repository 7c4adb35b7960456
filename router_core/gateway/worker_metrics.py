"""Every worker's series on any worker's ``/metrics``: each serves its own on a private loopback port.

With ``serve --workers N`` the kernel hands a scrape of the shared port to any one worker. That
worker answers with its own series and every other worker's, fetched from the port ``serve``
gave each worker for its own series alone (on 127.0.0.1, ports that nobody else is told about),
merged by family and labelled ``worker`` (:func:`router_core.metrics.worker_merge.merge_workers`).
A worker that is down or slow does not fail or stall the scrape: after ``timeout_s`` its series
are left out and ``routelens_metrics_worker_up{worker}`` is 0 for it. Only the ``/metrics`` route
pays for this (the request path measures nothing more).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from router_core.gateway.peers import WorkerPeers
from router_core.metrics.worker_merge import merge_workers

__all__ = ["WORKER_METRICS", "WorkerMetrics"]

WORKER_HEADER = "x-routelens-worker"  # the gateway's answers say which worker answered; so does the private endpoint


class WorkerMetrics:
    """This worker's private metrics endpoint, and every worker's series merged for its ``/metrics``.

    Args:
        worker: This worker's number (an index into ``ports``).
        ports: Every worker's private port, by worker number, all on ``host``.
        own: This worker's own exposition (its registry, as its ``/metrics`` renders it).
        timeout_s: How long a scrape waits for another worker before leaving its series out.
        host: Where the private endpoints listen.
    """

    def __init__(self, worker: int, ports: Sequence[int], own: Callable[[], bytes], *, timeout_s: float = 1.0,
                 host: str = "127.0.0.1") -> None:
        self.peers = WorkerPeers(worker, ports, what="its series", timeout_s=timeout_s, host=host)
        self.worker = worker
        self._own = own

    def mount(self, app: web.Application) -> None:
        """Serve this worker's series while ``app`` runs; the gateway's ``/metrics`` finds the merge on ``app``."""
        app[WORKER_METRICS] = self
        self.peers.mount(app, lambda private: private.router.add_get("/metrics", self._serve_own))

    async def exposition(self) -> bytes:
        """Every worker's series, each labelled ``worker``: this one's, and the others' that answer in time."""
        own = self._own()
        others = self.peers.others
        found = await asyncio.gather(*(self._fetch(w) for w in others))
        return merge_workers({self.worker: own.decode(), **dict(zip(others, found, strict=True))})

    async def _fetch(self, worker: int) -> str | None:
        session = self.peers.session
        if session is None:
            return None
        try:
            async with session.get(self.peers.url(worker, "/metrics")) as resp:
                # that worker's own endpoint, not another program on a port it could not bind
                mine = resp.status == 200 and resp.headers.get(WORKER_HEADER) == str(worker)
                return (await resp.read()).decode() if mine else None
        except (aiohttp.ClientError, TimeoutError, UnicodeDecodeError):
            return None

    async def _serve_own(self, _: web.Request) -> web.Response:
        return web.Response(body=self._own(), headers={"Content-Type": CONTENT_TYPE_LATEST,
                                                       WORKER_HEADER: str(self.worker)})


WORKER_METRICS = web.AppKey("routelens.worker_metrics", WorkerMetrics)  # set by WorkerMetrics.mount
