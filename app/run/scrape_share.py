"""``serve --workers N`` scrapes each instance once a round, not N times: worker 0 scrapes, the others follow.

Every worker used to scrape every instance: N scrapes a second per instance, and N times the CPU
of reading and parsing them (about 0.2 s of a core a round at 200 instances, each worker). Worker
0 is the ``serve`` process itself (the others are its children: it cannot die without them), so it
scrapes, and streams each round to the others over its private loopback port, the one its siblings
already ask for pending traces (:mod:`app.run.siblings`). A follower takes each round into its own
view (:meth:`router_core.state.scraper.MetricsScraper.follow`): the same gauges, the same
``scraped_at``, its own latches, in-flight counts and observations as before. While rounds stop
arriving (worker 0 busy past its rounds, the stream broken) a follower scrapes for itself after
:data:`router_core.state.scraper.FOLLOW_FOR` intervals, and follows again once they come back.

The stream answers only a request that proves it knows the relay token ``serve`` gives its
processes (an HMAC, never the token), and each round carries an HMAC of its bytes, so a program
that took the port can neither read the fleet's state nor feed a worker one of its own. A frame is
a line ``LENGTH HMAC`` then LENGTH bytes of :func:`router_core.state.scrape_round.encode_round`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
from collections.abc import Sequence

import aiohttp
from aiohttp import web

from app.run.siblings import PROOF_HEADER, same_proof
from router_core import MetricsScraper, ScrapeResult, decode_round, encode_round

__all__ = ["ScrapeShare"]

log = logging.getLogger(__name__)
_PATH = "/v1/internal/scrapes"
LEADER = 0  # the worker that scrapes: serve's own process
_BACKLOG = 4  # rounds kept for a follower slower than the rounds (the oldest dropped first)
_MAX_FRAME = 64 << 20
_END = b""  # put on a stream's queue when worker 0 stops: the stream ends


class ScrapeShare:
    """Worker 0's rounds, served (:meth:`routes`, :meth:`attach` on worker 0) or followed (on the others).

    Args:
        worker: This worker's number.
        ports: Every worker's private port, by worker number (the siblings' ports).
        token: The secret the workers share (the relay token).
        host: Where the private endpoints listen.
    """

    def __init__(self, worker: int, ports: Sequence[int], token: str, *, host: str = "127.0.0.1") -> None:
        self.worker = worker
        self._url = f"http://{host}:{ports[LEADER]}{_PATH}"
        self._key = token.encode()
        self._ask = self._mac(b"follow\0%d" % LEADER)  # the proof a follower sends, worker 0 expects
        self._queues: set[asyncio.Queue[bytes]] = set()
        self._task: asyncio.Task[None] | None = None

    @property
    def leads(self) -> bool:
        """Whether this worker scrapes for the others."""
        return self.worker == LEADER

    def routes(self, private: web.Application) -> None:
        """Add the stream to worker 0's private application (nothing on the others)."""
        if self.leads:
            private.router.add_get(_PATH, self._serve)

    async def attach(self, scraper: MetricsScraper) -> None:
        """Worker 0: hand each round to the followers; the others: follow worker 0's rounds."""
        if self.leads:
            scraper.add_tap(self._publish)
        else:
            self._task = asyncio.create_task(self._follow(scraper, scraper.interval_s))

    async def close(self) -> None:
        """Stop following, or end the streams served (before the private application stops: it waits for them)."""
        for queue in self._queues:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(_END)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _mac(self, what: bytes) -> str:
        return hmac.new(self._key, what, hashlib.sha256).hexdigest()

    def _publish(self, seq: int, took_s: float | None, results: list[ScrapeResult]) -> None:
        if not self._queues:
            return
        body = encode_round(seq, took_s, results)
        frame = b"%d %s\n" % (len(body), self._mac(b"round\0" + body).encode()) + body
        for queue in self._queues:
            if queue.full():  # a follower that fell behind gets the newest rounds
                queue.get_nowait()
            queue.put_nowait(frame)

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        if not same_proof(request.headers.get(PROOF_HEADER, ""), self._ask):
            return web.Response(status=401)
        queue: asyncio.Queue[bytes] = asyncio.Queue(_BACKLOG)
        self._queues.add(queue)
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        try:
            await response.prepare(request)
            while (frame := await queue.get()) is not _END:
                await response.write(frame)
        except ConnectionResetError:  # the follower went (it ended, or connects again)
            pass
        finally:
            self._queues.discard(queue)
        return response

    async def _follow(self, scraper: MetricsScraper, interval_s: float) -> None:
        """Follow worker 0's stream until cancelled, connecting again after each break."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=2.0, sock_read=max(4 * interval_s, 5.0))
        broken: str | None = None
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                try:
                    async with session.get(self._url, headers={PROOF_HEADER: self._ask}) as resp:
                        if resp.status != 200:
                            raise ValueError(f"HTTP {resp.status}")
                        if broken is not None:
                            log.info("worker %d follows worker 0's scrape rounds again", self.worker)
                            broken = None
                        await self._take(resp, scraper)
                    raise ValueError("the stream ended")
                except (aiohttp.ClientError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
                    # INFO: at start worker 0 listens after its children, and at the end it stops first; a
                    # break that lasts is the scraper's to say (it scrapes for itself after FOLLOW_FOR intervals)
                    reason = f"{type(exc).__name__}: {exc}"
                    if broken != reason:
                        log.info("worker %d cannot follow worker 0's scrape rounds for now (%s)", self.worker, reason)
                    broken = reason
                await asyncio.sleep(interval_s)

    async def _take(self, resp: aiohttp.ClientResponse, scraper: MetricsScraper) -> None:
        while True:
            head = await resp.content.readline()
            if not head:
                return
            size_text, _, mac = head.strip().partition(b" ")
            size = int(size_text)
            if not 0 < size <= _MAX_FRAME:
                raise ValueError(f"a frame of {size} bytes")
            body = await resp.content.readexactly(size)
            if not same_proof(mac.decode("ascii", "replace"), self._mac(b"round\0" + body)):
                raise ValueError("a round without worker 0's proof")
            scraper.follow(*decode_round(body))
