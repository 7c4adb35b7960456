"""A followed prober's series on the gateway's ``/metrics``: its probe families; its last answer's while it is silent.

The audit's case: a ``kill -STOP``-ped prober's series left the gateway's ``/metrics`` within
seconds, so the alerts Prometheus drew from them resolved while the faults were still there. The
follower reads a real loopback stub of the prober (``GET /metrics`` and ``GET /v1/probes/verdicts``)
that answers, then hangs (the connection taken, nothing comes back), then answers again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from router_core.gateway.probe_source import VerdictFollower, feed_body
from schemas.probe import ProbeStatus
from tests.serve_thread import on_loop

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def exposition(verdict: str, last_result: float) -> bytes:
    """What the prober's ``/metrics`` serves: its probe families and its pipeline's (which the gateway has too)."""
    return (
        "# HELP routelens_probe_verdict The hysteresis verdict\n# TYPE routelens_probe_verdict gauge\n"
        f'routelens_probe_verdict{{instance="a",kind="syntax",model="m",verdict="{verdict}"}} 1.0\n'
        "# HELP routelens_probe_last_result_timestamp_seconds When the newest result came\n"
        "# TYPE routelens_probe_last_result_timestamp_seconds gauge\n"
        f"routelens_probe_last_result_timestamp_seconds {last_result}\n"
        "# HELP routelens_traces_queued_total Records queued\n# TYPE routelens_traces_queued_total counter\n"
        "routelens_traces_queued_total 7.0\n"
    ).encode()


def feed() -> dict[str, Any]:
    status = ProbeStatus(kind="syntax", verdict="failed", since=T0, value=0.0, threshold=1.0)
    return feed_body({"a": [status]}, [], 1.0, "prober")


class StubProber:
    """The prober on loopback: ``/metrics`` and its feed answer, or, ``wedged``, take the request and never answer."""

    def __init__(self) -> None:
        self.metrics = exposition("failed", 1_800_000_000.0)
        self.wedged = False
        self.asked = 0  # GET /metrics requests received
        self.status = 200
        self._release = asyncio.Event()

    async def _hang(self) -> None:
        if self.wedged:
            await self._release.wait()  # a stopped process: the kernel accepted the connection, nobody answers

    async def serve_metrics(self, _: web.Request) -> web.Response:
        self.asked += 1
        await self._hang()
        return web.Response(status=self.status, body=self.metrics, content_type="text/plain")

    async def verdicts(self, _: web.Request) -> web.Response:
        await self._hang()
        return web.json_response(feed())

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        app = web.Application()
        app.router.add_get("/metrics", self.serve_metrics)
        app.router.add_get("/v1/probes/verdicts", self.verdicts)
        async with on_loop(app) as url:
            try:
                yield url
            finally:
                self._release.set()


def lines(text: bytes) -> list[str]:
    return text.decode().splitlines()


def test_a_silent_prober_s_series_stay_those_of_its_last_answer() -> None:
    stub = StubProber()

    async def body() -> None:
        async with stub.serving() as url:
            follower = VerdictFollower(url, lambda s, i: None, interval_s=0.1)
            try:
                assert await follower.metrics_text() == b""  # not following yet: nothing read, nothing to show
                assert await follower.poll_once() == 1
                first = await follower.metrics_text()
                # only the probe families: its pipeline's series share names with the gateway's own
                assert [ln for ln in lines(first) if not ln.startswith("#")] == [
                    'routelens_probe_verdict{instance="a",kind="syntax",model="m",verdict="failed"} 1.0',
                    "routelens_probe_last_result_timestamp_seconds 1800000000.0"]

                stub.wedged = True  # it hangs: /metrics gives up after its second, with the last answer's series
                assert await asyncio.wait_for(follower.metrics_text(), 30) == first  # (30 s: it does not hang)
                assert await follower.poll_once() == 0 and follower.problem() is not None
                asked = stub.asked
                # its feed does not answer either: the last series at once, the prober not asked
                assert await follower.metrics_text() == first and stub.asked == asked

                stub.wedged = False  # it answers again (a newer result, the fault gone): its series now
                stub.metrics = exposition("ok", 1_800_000_300.0)
                await follower.poll_once()
                assert follower.problem() is None
                again = await follower.metrics_text()
                assert 'verdict="ok"} 1.0' in again.decode() and b"1800000300.0" in again
            finally:
                await follower.stop()

    asyncio.run(body())


def test_a_prober_answering_an_error_or_gone_keeps_its_last_series() -> None:
    stub = StubProber()

    async def body() -> None:
        follower: VerdictFollower | None = None
        try:
            async with stub.serving() as url:
                follower = VerdictFollower(url, lambda s, i: None, interval_s=0.1)
                await follower.poll_once()
                first = await follower.metrics_text()
                assert b"routelens_probe_verdict{" in first
                stub.status = 503  # its /metrics answers an error page: not its series
                assert await follower.metrics_text() == first
            # gone: connections refused, before and after the follower's next poll notices
            assert await follower.metrics_text() == first
            await follower.poll_once()
            assert "ClientConnectorError" in (follower.problem() or "")
            assert await follower.metrics_text() == first
        finally:
            if follower is not None:
                await follower.stop()

    asyncio.run(body())
