"""The workers' sibling lookup (:mod:`app.run.siblings`) in one process: real endpoints on loopback ports.

A worker answers a sibling only with a proof made from the relay token, and the asker takes an
answer only with the answering worker's proof of its body; a sibling that does not answer costs
the lookup its timeout, no more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from app.run.procs import free_ports
from app.run.siblings import SIBLING_PORTS_ENV, SiblingTraces, sibling_ports
from bench.synthetic import TraceFactory
from schemas.trace import DecisionTrace

TRACES = list(TraceFactory(seed=2, n_candidates=2).traces(3))


@asynccontextmanager
async def workers(pending: list[dict[str, DecisionTrace]], tokens: list[str],
                  timeout_s: float = 0.5) -> AsyncIterator[list[SiblingTraces]]:
    ports = free_ports(len(pending))
    async with AsyncExitStack() as stack:
        out = []
        for i, (held, token) in enumerate(zip(pending, tokens, strict=True)):
            sib = SiblingTraces(i, ports, held.get, token, timeout_s=timeout_s)
            await sib.start()
            stack.push_async_callback(sib.close)
            out.append(sib)
        yield out


def test_a_worker_finds_the_trace_another_worker_holds_and_not_one_nobody_holds() -> None:
    a, b, c = TRACES

    async def main() -> None:
        async with workers([{a.request_id: a}, {b.request_id: b}, {}], ["k"] * 3) as (w0, w1, w2):
            assert await w2.find(b.request_id) == b
            assert await w2.find(a.request_id) == a
            assert await w0.find(b.request_id) == b
            assert await w0.find(a.request_id) is None  # its own: the caller looked there first
            assert await w1.find(c.request_id) is None

    asyncio.run(main())


def test_a_worker_answers_no_one_without_the_token() -> None:
    trace = TRACES[0]

    async def main() -> None:
        async with workers([{trace.request_id: trace}, {}], ["right", "wrong"]) as (w0, w1):
            assert await w1.find(trace.request_id) is None  # its proof is not w0's
            url = w0.peers.url(0, "/v1/internal/pending")
            async with aiohttp.ClientSession() as session:
                for headers in ({}, {"x-routelens-proof": "00" * 32}, {"x-routelens-proof": "é"}):
                    async with session.get(url, params={"request_id": trace.request_id}, headers=headers) as resp:
                        assert resp.status == 401 and await resp.read() == b""

    asyncio.run(main())


def test_an_answer_without_the_workers_proof_of_its_body_is_not_taken() -> None:
    """A program that took a worker's port cannot pass a trace off as that worker's (it echoes the question's proof)."""
    trace = TRACES[0]

    async def impostor(request: web.Request) -> web.Response:
        return web.Response(body=trace.model_dump_json(), content_type="application/json",
                            headers={"x-routelens-proof": request.headers.get("x-routelens-proof", "")})

    async def main() -> None:
        ports = free_ports(2)
        app = web.Application()
        app.router.add_get("/v1/internal/pending", impostor)
        async with TestServer(app, host="127.0.0.1", port=ports[0]):
            asker = SiblingTraces(1, ports, lambda _: None, "k")
            await asker.start()
            try:
                assert await asker.find(trace.request_id) is None
            finally:
                await asker.close()

    asyncio.run(main())


def test_a_sibling_that_does_not_answer_costs_the_timeout_only() -> None:
    trace = TRACES[0]

    async def main() -> None:
        ports = free_ports(3)
        held: list[asyncio.StreamWriter] = []

        async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            held.append(writer)  # accepted, never answered (a stopped worker's backlog does the same)

        silent = await asyncio.start_server(hold, "127.0.0.1", ports[1])
        async with silent:
            holder = SiblingTraces(2, ports, {trace.request_id: trace}.get, "k")
            asker = SiblingTraces(0, ports, lambda _: None, "k", timeout_s=0.3)
            await holder.start()
            await asker.start()
            try:
                t0 = time.perf_counter()
                assert await asker.find(trace.request_id) == trace  # the one that answers, not waiting for the other
                assert time.perf_counter() - t0 < 0.25
                t0 = time.perf_counter()
                assert await asker.find("req_nobody") is None
                assert 0.25 < time.perf_counter() - t0 < 1.0
            finally:
                await asker.close()
                await holder.close()
                for writer in held:
                    writer.close()

    asyncio.run(main())


def test_the_ports_come_from_the_environment_serve_set_for_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SIBLING_PORTS_ENV, "8101,8102")
    assert sibling_ports(2) == [8101, 8102]
    assert sibling_ports(3) == [] and sibling_ports(1) == []  # another serve's, or one worker
    monkeypatch.setenv(SIBLING_PORTS_ENV, "8101,x")
    assert sibling_ports(2) == []
    monkeypatch.delenv(SIBLING_PORTS_ENV)
    assert sibling_ports(2) == []
