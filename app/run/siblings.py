"""Read-your-writes across ``serve --workers N``: a trace another worker has not delivered to the store yet.

Each worker keeps the traces it emitted until the store has taken them (the emitter's pending
traces, up to ``storage.flush_interval_ms`` plus a relay), and answers a lookup by request id from
them first. The kernel hands the next connection to any worker, so feedback or a trace lookup
right after the answer reaches the other worker half the time, before the store has the trace: a
404. So a worker that finds a request id neither among its own pending traces nor in the store
asks its siblings, on private loopback ports that ``serve`` chose for them (as it does for each
worker's ``/metrics``), every sibling at once, each within ``timeout_s``. Only a miss pays this (a
loopback round trip, about 2 ms); a hit and the chat route never do.

The private endpoint answers only a request that proves it knows the relay token that ``serve``
gives its processes (``ROUTELENS_RELAY_TOKEN``): an HMAC of the worker asked and the request id,
never the token itself, so a program that took a worker's port learns nothing it could use
elsewhere. The answer carries an HMAC of its body in turn, so such a program cannot pass a trace
of its own off as a worker's.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
from collections.abc import Callable, Sequence

import aiohttp
from aiohttp import web
from pydantic import ValidationError

from router_core import WorkerPeers
from schemas.trace import DecisionTrace

__all__ = ["PROOF_HEADER", "SIBLING_PORTS_ENV", "SiblingTraces", "same_proof", "sibling_ports"]

log = logging.getLogger(__name__)
SIBLING_PORTS_ENV = "ROUTELENS_SIBLING_PORTS"  # set by the serve that starts the workers, for all of them
_PATH = "/v1/internal/pending"  # ?request_id=: any id feedback may name, whatever its characters
PROOF_HEADER = "x-routelens-proof"


def sibling_ports(workers: int) -> list[int]:
    """Every worker's private port for sibling lookups, from the environment ``serve`` set (empty: none)."""
    text = os.environ.get(SIBLING_PORTS_ENV, "")
    try:
        ports = [int(p) for p in text.split(",")] if text else []
    except ValueError:
        return []
    return ports if len(ports) == workers > 1 else []


class SiblingTraces:
    """This worker's pending traces served to its siblings, and theirs looked up on a miss.

    Args:
        worker: This worker's number (an index into ``ports``).
        ports: Every worker's private port, by worker number, all on ``host``.
        pending: This worker's traces not delivered yet, by request id.
        token: The secret the workers share (the relay token).
        timeout_s: How long a lookup waits for the siblings.
        host: Where the private endpoints listen.
    """

    def __init__(self, worker: int, ports: Sequence[int], pending: Callable[[str], DecisionTrace | None],
                 token: str, *, timeout_s: float = 0.5, host: str = "127.0.0.1") -> None:
        self.peers = WorkerPeers(worker, ports, what="its pending traces", timeout_s=timeout_s, host=host)
        self.worker = worker
        self._pending = pending
        self._key = token.encode()

    def mount(self, app: web.Application, more: Callable[[web.Application], None] | None = None) -> None:
        """Serve this worker's pending traces, and ask the siblings, while ``app`` runs.

        ``more``: adds other routes to the same private application (worker 0's scrape rounds).
        """
        def routes(private: web.Application) -> None:
            self._routes(private)
            if more is not None:
                more(private)

        self.peers.mount(app, routes)

    async def start(self) -> None:
        """Listen on this worker's private port, and open the client that asks the siblings."""
        await self.peers.start(self._routes)

    async def close(self) -> None:
        """Stop the private endpoint and the client."""
        await self.peers.close()

    def _routes(self, private: web.Application) -> None:
        private.router.add_get(_PATH, self._serve)

    async def find(self, request_id: str) -> DecisionTrace | None:
        """The trace of ``request_id`` that a sibling has not delivered yet (None: none has it, or none answered)."""
        asks = [asyncio.ensure_future(self._ask(w, request_id)) for w in self.peers.others]
        try:
            for done in asyncio.as_completed(asks):
                if (trace := await done) is not None:
                    return trace
            return None
        finally:
            for ask in asks:
                ask.cancel()

    def _mac(self, worker: int, request_id: str, answer: bytes | None = None) -> str:
        """The proof of a question to ``worker`` about ``request_id`` (or of its ``answer``)."""
        what = b"ask" if answer is None else b"answer:" + hashlib.sha256(answer).digest()
        msg = b"%d\0%s\0%s" % (worker, request_id.encode("utf-8", "surrogatepass"), what)
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()

    async def _ask(self, worker: int, request_id: str) -> DecisionTrace | None:
        session = self.peers.session
        if session is None:
            return None
        try:
            async with session.get(self.peers.url(worker, _PATH), params={"request_id": request_id},
                                         headers={PROOF_HEADER: self._mac(worker, request_id)}) as resp:
                body = await resp.read()
                proof = self._mac(worker, request_id, body)
                if resp.status != 200 or not same_proof(resp.headers.get(PROOF_HEADER, ""), proof):
                    return None  # not there, or not that worker's endpoint
                return DecisionTrace.model_validate_json(body)
        except (aiohttp.ClientError, TimeoutError, ValidationError):
            return None

    async def _serve(self, request: web.Request) -> web.Response:
        rid = request.query.get("request_id", "")
        if not same_proof(request.headers.get(PROOF_HEADER, ""), self._mac(self.worker, rid)):
            return web.Response(status=401)
        trace = self._pending(rid)
        if trace is None:
            return web.Response(status=404)
        body = trace.model_dump_json().encode()
        return web.Response(body=body, content_type="application/json",
                            headers={PROOF_HEADER: self._mac(self.worker, rid, body)})


def same_proof(given: str, expected: str) -> bool:
    """Compare a proof in constant time (bytes: a header may hold any character)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())
