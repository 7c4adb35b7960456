"""Open-loop traffic from the corpus through the gateway, with the official OpenAI client.

Requests are sent on schedule whatever the answers' speed (open loop), up to a concurrency
bound, so an overloaded gateway shows up as latency and errors rather than as a slower sender.
Raw query text is never logged or returned: a result carries the query's class, language and hash.
:func:`run_traffic` sends single queries at a fixed rate; :mod:`sim.workload` adds rate curves,
sessions and feedback on top of :func:`send_chat`; both schedule through :func:`open_loop`.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletionChunk

from schemas.hashing import query_hash
from sim.corpus import QUERIES, Query

__all__ = ["TrafficResult", "open_loop", "run_traffic", "send_chat"]

_MAX_ERROR_CHARS = 300
T = TypeVar("T")


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
        sent_at_s: When it was sent, seconds from the start of the run.
        instance: The ``x-routelens-instance`` header: where the gateway sent it.
        model: The ``x-routelens-model`` header.
        session: Ticket id of the session it belongs to.
        turn: Turn within the session (0 for the first or a lone query).
        stream: Whether it was streamed.
        grade: ``correct``, ``wrong`` or ``off-topic`` against ground truth (None for errors).
        expected_model: Where it should have gone, when known.
        feedback_status: HTTP status of the feedback post, when one was sent.
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
    sent_at_s: float = 0.0
    instance: str | None = None
    model: str | None = None
    session: str | None = None
    turn: int = 0
    stream: bool = False
    grade: str | None = None
    expected_model: str | None = None
    feedback_status: int | None = None


@dataclass(frozen=True, slots=True)
class Sent:
    """The raw outcome of :func:`send_chat`: the result and the answer's text (never stored)."""

    result: TrafficResult
    answer: str | None


def _described(exc: Exception) -> str:
    """``Class: message``, and under a connection error the transport's error class (``(ConnectError)``: none made).

    Only the class of the cause: its message could name more than the request's fate.
    """
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, openai.APIConnectionError) and exc.__cause__ is not None:
        text += f" ({type(exc.__cause__).__name__})"
    return text[:_MAX_ERROR_CHARS]


async def send_chat(client: AsyncOpenAI, index: int, query: Query, messages: list[dict[str, str]],
                    clock: Callable[[], float], *, sent_at_s: float = 0.0, stream: bool = False,
                    session: str | None = None, turn: int = 0) -> Sent:
    """Send one chat request with ``model: "auto"`` and read the routing headers.

    Args:
        client: The OpenAI client pointed at the gateway.
        index: Position in the sending order.
        query: The corpus query behind the request (class, language, hash).
        messages: The conversation to send.
        clock: Seconds, for the latency.
        sent_at_s: Offset of the send from the start of the run, copied into the result.
        stream: Stream the answer.
        session: Ticket id, sent as the OpenAI ``user`` field and ``X-Session-Id``.
        turn: Turn within the session.

    Returns:
        The result and the answer text (None on errors).
    """
    started = clock()
    base: dict[str, Any] = {"index": index, "cls": query.cls, "lang": query.lang, "query_hash": query_hash(query.text),
                            "sent_at_s": sent_at_s, "session": session, "turn": turn, "stream": stream}
    extra: dict[str, Any] = {"user": session, "extra_headers": {"X-Session-Id": session}} if session else {}
    headers: Any = {}
    try:
        if stream:
            async with client.chat.completions.with_streaming_response.create(
                model="auto", messages=messages, stream=True, **extra  # type: ignore[arg-type]
            ) as resp:
                headers, status = resp.headers, resp.status_code
                chunks: AsyncStream[ChatCompletionChunk] = await resp.parse()  # type: ignore[assignment]
                parts = [chunk.choices[0].delta.content or "" async for chunk in chunks if chunk.choices]
            answer = "".join(parts)
        else:
            raw = await client.chat.completions.with_raw_response.create(
                model="auto", messages=messages, **extra  # type: ignore[arg-type]
            )
            headers, status = raw.headers, raw.status_code
            answer = raw.parse().choices[0].message.content or ""
    except openai.APIStatusError as exc:
        h = exc.response.headers
        return Sent(TrafficResult(**base, status="error", http_status=exc.status_code,
                                  latency_ms=(clock() - started) * 1000, request_id=h.get("x-request-id"),
                                  error=f"{type(exc).__name__}: {exc.message}"[:_MAX_ERROR_CHARS],
                                  instance=h.get("x-routelens-instance"), model=h.get("x-routelens-model")), None)
    except Exception as exc:  # connection errors, timeouts, and bodies the SDK cannot read (garbage)
        return Sent(TrafficResult(**base, status="error", http_status=None, latency_ms=(clock() - started) * 1000,
                                  request_id=headers.get("x-request-id") if headers else None,
                                  error=_described(exc),
                                  instance=headers.get("x-routelens-instance") if headers else None,
                                  model=headers.get("x-routelens-model") if headers else None), None)
    return Sent(TrafficResult(**base, status="ok", http_status=status, latency_ms=(clock() - started) * 1000,
                              request_id=headers.get("x-request-id"), instance=headers.get("x-routelens-instance"),
                              model=headers.get("x-routelens-model")), answer)


async def run_traffic(base_url: str, *, rps: float, count: int | None = None, duration_s: float | None = None,
                      seed: int = 0, on_result: Callable[[TrafficResult], None] | None = None,
                      concurrency: int = 64, timeout_s: float = 30.0,
                      clock: Callable[[], float] = time.perf_counter) -> list[TrafficResult]:
    """Send single corpus queries with ``model: "auto"`` at a fixed rate to ``{base_url}/v1/chat/completions``.

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

    def schedule() -> Iterator[tuple[int, float, Query]]:
        for index in itertools.count():
            offset = index / rps
            if (count is not None and index >= count) or (duration_s is not None and offset >= duration_s):
                return
            yield index, offset, rng.choice(QUERIES)

    async with AsyncOpenAI(base_url=f"{base_url}/v1", api_key="routelens", max_retries=0,
                           timeout=timeout_s) as client:

        async def send(index: int, offset: float, query: Query) -> TrafficResult:
            messages = [{"role": "user", "content": query.text}]
            return (await send_chat(client, index, query, messages, clock, sent_at_s=offset)).result

        return await open_loop(schedule(), send, concurrency=concurrency, on_result=on_result)


async def open_loop(
    items: Iterable[tuple[int, float, T]],
    send: Callable[[int, float, T], Awaitable[TrafficResult]],
    *,
    concurrency: int,
    on_result: Callable[[TrafficResult], None] | None = None,
    origin: float | None = None,
) -> list[TrafficResult]:
    """Start ``send(index, at_s, item)`` for each item at its time, whatever the answers' speed.

    Args:
        items: ``(index, at_s, item)`` in sending order; ``at_s`` counts from ``origin``.
        send: Sends one item and returns its result.
        concurrency: Most sends in flight; sending waits for a free slot beyond it.
        on_result: Called with each result as it arrives.
        origin: ``loop.time()`` that ``at_s`` counts from (now by default).

    Returns:
        The results in index order.
    """
    loop = asyncio.get_running_loop()
    start = loop.time() if origin is None else origin
    slots = asyncio.Semaphore(concurrency)
    results: dict[int, TrafficResult] = {}

    async def one(index: int, at_s: float, item: T) -> None:
        try:
            result = await send(index, at_s, item)
        finally:
            slots.release()
        results[index] = result
        if on_result is not None:
            on_result(result)

    async with asyncio.TaskGroup() as group:
        for index, at_s, item in items:
            await asyncio.sleep(max(0.0, start + at_s - loop.time()))
            await slots.acquire()
            group.create_task(one(index, at_s, item))
    return [results[i] for i in sorted(results)]
