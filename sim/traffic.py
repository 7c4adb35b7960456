"""Open-loop traffic from the corpus through the gateway, with the official OpenAI client.

Requests are sent at a fixed rate whatever the answers' speed (open loop), up to a concurrency
bound, so an overloaded gateway shows up as latency and errors rather than as a slower sender.
Raw query text is never logged or returned: a result carries the query's class, language and hash.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import openai
from openai import AsyncOpenAI

from schemas.hashing import query_hash
from sim.corpus import QUERIES, Query

__all__ = ["TrafficResult", "run_traffic"]

_MAX_ERROR_CHARS = 300


@dataclass(frozen=True, slots=True)
class TrafficResult:
    """What happened to one generated request.

    Attributes:
        index: Position in the sending order.
        cls: Traffic class of the query sent.
        lang: Language of the query sent.
        query_hash: ``sha256:`` hash of the normalised query (never the text).
        status: ``ok`` or ``error``.
        http_status: HTTP status, or None when no response arrived.
        latency_ms: Time from sending to the parsed answer or the error.
        request_id: The ``x-request-id`` response header, when present.
        error: Error class and message, for errors.
    """

    index: int
    cls: str
    lang: str
    query_hash: str
    status: Literal["ok", "error"]
    http_status: int | None
    latency_ms: float
    request_id: str | None
    error: str | None = None


async def _send(client: AsyncOpenAI, index: int, query: Query, clock: Callable[[], float]) -> TrafficResult:
    started = clock()

    def result(status: Literal["ok", "error"], http_status: int | None, request_id: str | None,
               error: str | None = None) -> TrafficResult:
        return TrafficResult(index, query.cls, query.lang, query_hash(query.text), status, http_status,
                             (clock() - started) * 1000, request_id, error and error[:_MAX_ERROR_CHARS])

    try:
        raw = await client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": query.text}]
        )
        raw.parse()  # a body the SDK cannot read is an error too
    except openai.APIStatusError as exc:
        return result("error", exc.status_code, exc.response.headers.get("x-request-id"),
                      f"{type(exc).__name__}: {exc.message}")
    except openai.OpenAIError as exc:
        return result("error", None, None, f"{type(exc).__name__}: {exc}")
    return result("ok", raw.status_code, raw.headers.get("x-request-id"))


async def run_traffic(base_url: str, *, rps: float, count: int | None = None, duration_s: float | None = None,
                      seed: int = 0, on_result: Callable[[TrafficResult], None] | None = None,
                      concurrency: int = 64, timeout_s: float = 30.0,
                      clock: Callable[[], float] = time.perf_counter) -> list[TrafficResult]:
    """Send corpus queries with ``model: "auto"`` to ``{base_url}/v1/chat/completions``.

    Args:
        base_url: The gateway (or an instance), without ``/v1``.
        rps: Sending rate, requests per second.
        count: Stop after this many requests.
        duration_s: Stop sending once this many seconds of schedule have passed.
        seed: Seeds the choice of queries, so a run is reproducible.
        on_result: Called with each result as it arrives.
        concurrency: Most requests in flight; sending waits for a free slot beyond it.
        timeout_s: Per-request timeout.
        clock: Seconds, for latencies.

    Returns:
        The results in sending order.

    Raises:
        ValueError: When neither ``count`` nor ``duration_s`` bounds the run, or a bound is invalid.
    """
    if count is None and duration_s is None:
        raise ValueError("run_traffic needs count or duration_s, or it would never stop")
    if rps <= 0 or concurrency < 1:
        raise ValueError("rps must be > 0 and concurrency >= 1")
    rng = random.Random(seed)
    slots = asyncio.Semaphore(concurrency)
    results: dict[int, TrafficResult] = {}

    async def one(index: int, query: Query) -> None:
        try:
            result = await _send(client, index, query, clock)
        finally:
            slots.release()
        results[index] = result
        if on_result is not None:
            on_result(result)

    loop = asyncio.get_running_loop()
    async with AsyncOpenAI(base_url=f"{base_url}/v1", api_key="routelens", max_retries=0,
                           timeout=timeout_s) as client, asyncio.TaskGroup() as group:
        start = loop.time()
        index = 0
        while count is None or index < count:
            offset = index / rps
            if duration_s is not None and offset >= duration_s:
                break
            await asyncio.sleep(max(0.0, start + offset - loop.time()))
            await slots.acquire()
            group.create_task(one(index, rng.choice(QUERIES)))
            index += 1
    return [results[i] for i in sorted(results)]
