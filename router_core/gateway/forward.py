"""Forwarding one request to the decided instances, trying the next one when an attempt fails.

The forwarder returns its attempts as values; the recorder turns them into trace steps.

The upstream call goes through :class:`router_core.gateway.http1.Http1Pool` (keep-alive HTTP/1.1,
httptools parsing; see there why not aiohttp's client). A non-stream attempt has a connect timeout
and a total (``gateway.upstream_timeout_s``); its body
is read whole, as bytes in the upstream's coding (``router_core.gateway.encoding`` decides what the
client gets). A stream attempt has a connect timeout and a time-to-first-byte timeout and no total:
it succeeds once its first chunk has arrived, which the forwarder reads, so that a failure before
it is a failed attempt and the next instance is tried; ``router_core.gateway.streaming`` relays the
rest. An error status other than the retryable ones is an answer: its body is read and passed on.

A 429 is retried on the next instance like a 5xx, and its instance is held out by the breakers
for its ``Retry-After`` (:func:`router_core.gateway.errors.retry_after_s`: bounded, a short default
when absent), so later requests go elsewhere without asking it. When every attempt was answered 429
(or every instance was refused while held), :attr:`Forwarded.retry_after_s` says when to come back.
Only answered attempts count in an instance's latency (see :mod:`router_core.state.window`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson

from router_core.gateway.encoding import UPSTREAM_ACCEPT
from router_core.gateway.errors import retry_after_s
from router_core.gateway.hedge import HEDGED_OUT, race
from router_core.gateway.http1 import Http1Pool, UpstreamError, UpstreamResponse
from router_core.gateway.trace_context import TraceContext
from router_core.resilience.breakers import Admission, AttemptOutcome, BreakerBoard
from router_core.resilience.fallbacks import Abort, Passed, classify, next_target
from router_core.rules.ir import TimeoutPolicy
from router_core.state.inflight import InflightCounter, Ticket
from router_core.state.view import StateView
from schemas.common import AttemptStatus
from schemas.config import GatewaySettings
from schemas.config.resilience import ErrorClass, NextTarget, ResilienceSettings
from schemas.fleet import InstanceSpec
from schemas.trace import Attempt

__all__ = ["Forwarded", "Forwarder"]

_RETRYABLE = {429, 500, 502, 503, 504}


@dataclass(slots=True)
class Forwarded:
    """Every attempt made, and what the upstream that answered gave back (None when every attempt failed).

    Attributes:
        body: The whole body (non-stream answers and error statuses), in the upstream's coding.
        first_chunk: A 200 stream's first chunk; the rest is still in ``response``.
        first_byte_at: When that chunk arrived (the forwarder's clock), for TTFT.
        open_stream: A 200 stream's in-flight ticket: the caller ends it when the relay ends.
        passed: The instances not sent to in ranked order: refused by a breaker, or a half-open trial put first.
        retry_after_s: Rate limited: every attempt was answered 429, or every instance was refused while
            held out after one; the soonest of their holds, in seconds (None: not rate limited).
    """

    attempts: list[Attempt]
    spec: InstanceSpec | None = None
    response: UpstreamResponse | None = None
    body: bytes = b""
    last_error: str | None = None
    first_chunk: bytes = b""
    first_byte_at: float | None = None
    open_stream: Ticket | None = None
    passed: list[Passed] = field(default_factory=list)
    retry_after_s: float | None = None

    @property
    def answered(self) -> InstanceSpec | None:
        """The instance whose answer the client gets (None: none answered)."""
        return None if self.response is None else self.spec

    def failure(self) -> str:
        """Why no instance answered: every instance refused by its breaker, else the last attempt's error."""
        refused = [p for p in self.passed if p.refused]
        if not self.attempts and self.last_error is None and refused:
            models = ", ".join(dict.fromkeys(p.model for p in refused))
            return f"every instance of {models} refused by its breaker: {', '.join(p.why for p in refused)}"
        why = f"last error: {self.last_error or 'none recorded'}"
        return why + (f"; refused by its breaker: {', '.join(p.why for p in refused)}" if refused else "")


@dataclass(frozen=True, slots=True)
class _Call:
    """What every attempt of one request shares."""

    body: dict[str, Any]
    request_id: str
    stream: bool
    authorization: str | None
    limit: float
    trace: TraceContext | None
    origin: float | None  # perf time of the trace's ts: an attempt's start_ms counts from it


@dataclass(frozen=True, slots=True)
class _Tried:
    """One attempt's record and what it brought back."""

    attempt: Attempt
    got: Forwarded
    resp: UpstreamResponse | None
    ok: bool
    answered: bool
    cls: ErrorClass | None
    error: str | None
    hold_s: float | None = None  # a 429's hold of its instance (its Retry-After, bounded)


class _EmptyStream(Exception):
    """A 200 stream ended before its first byte."""


class Forwarder:
    """Sends the request to instances in ranked order, recording each attempt.

    Args:
        pool: The upstream connections (the forwarder's own when None; :meth:`close` closes it).
        view: Receives each attempt's success or failure.
        settings: Timeouts and whether the client's ``Authorization`` goes upstream.
        keys: Instance id -> the key sent upstream as ``Authorization: Bearer``.
        perf: Monotonic clock (injected).
        wall: Epoch seconds (injected), to read a ``Retry-After`` given as an HTTP date.
        inflight: Counts each attempt from sending to completion (None: not counted).
        breakers: Admits each attempt and counts its outcome (None: no breakers).
        resilience: Typed fallbacks per error class and the request deadline (None: the defaults).
    """

    def __init__(
        self,
        pool: Http1Pool | None,
        view: StateView,
        settings: GatewaySettings,
        *,
        keys: Mapping[str, str] | None = None,
        perf: Callable[[], float] = time.perf_counter,
        wall: Callable[[], float] = time.time,
        inflight: InflightCounter | None = None,
        breakers: BreakerBoard | None = None,
        resilience: ResilienceSettings | None = None,
    ) -> None:
        self._inflight = inflight
        self._breakers = breakers
        self._resilience = resilience or ResilienceSettings()
        self._pool = pool or Http1Pool(limit=settings.max_connections)
        self._view = view
        self._settings = settings
        self._keys = dict(keys or {})
        self._perf = perf
        self._wall = wall

    @property
    def pool(self) -> Http1Pool:
        """The upstream connection pool (shared with a rule chain's responder URLs)."""
        return self._pool

    async def close(self) -> None:
        """Close the upstream connections."""
        await self._pool.close()

    def _headers(self, spec: InstanceSpec, request_id: str, stream: bool, authorization: str | None) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "X-Request-Id": request_id,
            # A compressed SSE stream would be held back by the compressor; whole bodies may come compressed.
            "Accept-Encoding": "identity" if stream else UPSTREAM_ACCEPT,
        }
        if self._settings.forward_authorization and authorization:
            headers["Authorization"] = authorization
        elif (key := self._keys.get(spec.id)) is not None:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def forward(
        self, body: dict[str, Any], targets: Sequence[InstanceSpec], request_id: str, max_attempts: int,
        *, authorization: str | None = None, timeout: TimeoutPolicy | None = None, trace: TraceContext | None = None,
        origin: float | None = None,
    ) -> Forwarded:
        """Try ``targets`` in order until one answers (a stream: until its first chunk arrives).

        Args:
            body: The request; its ``model`` is set per target.
            targets: Instances in ranked order.
            request_id: Sent upstream as ``X-Request-Id``.
            max_attempts: Instances tried at most.
            authorization: The client's ``Authorization`` header (sent on with ``forward_authorization``).
            timeout: A rule's ``timeout_policy``: its timeout per attempt (the total of a whole
                answer, the first byte of a stream) and the pause before each retry.
            trace: The request's trace context: each attempt gets a span id of its own, sent
                upstream as ``traceparent`` (with the client's ``tracestate``).
            origin: The injected clock's time at the trace's ``ts``: each attempt records when it
                was sent after it (``start_ms``; None: not recorded).
        """
        attempts: list[Attempt] = []
        last_error: str | None = None
        stream = bool(body.get("stream"))
        limit = self._settings.first_byte_timeout_s if stream else self._settings.upstream_timeout_s
        if timeout is not None:
            limit = timeout.initial_timeout_s
        res, board = self._resilience, self._breakers
        deadline = None if res.deadline_s is None else self._perf() + res.deadline_s
        tried: set[str] = set()
        steps: tuple[NextTarget, ...] = ("any",)
        backoff, last = 0.0, None
        call = _Call(body, request_id, stream, authorization, limit, trace, origin)
        passed: list[Passed] = []
        holds: list[float] = []  # the 429 holds of the attempts
        while len(attempts) < max_attempts:
            abort = Abort()
            spec, adm = next_target(targets, tried, last, steps, board, abort.fire, passed, len(attempts))
            if spec is None:
                break
            wait = max(backoff, timeout.retry_backoff_s if timeout is not None else 0.0) if attempts else 0.0
            left = None if deadline is None else deadline - self._perf() - wait
            if left is not None and left <= 0:
                if board is not None and adm is not None:
                    board.done(adm, "aborted")
                last_error = "deadline_exceeded"
                break
            if wait > 0:
                await asyncio.sleep(wait)
            tried.add(spec.id)
            last = spec
            first = self._attempt(call, len(attempts), spec, adm, abort, left)
            hedge = res.hedging
            if attempts or stream or not hedge.enabled or len(attempts) + 1 >= max_attempts:
                results = [await first]
            else:  # the first whole-answer attempt: a twin goes out if it is still out past its expected latency
                delay = hedge.delay_s(self._view.p95_ms(spec.id))
                results = await race(first, abort, delay,
                                     partial(self._twin, call, targets, tried, spec, left, passed),
                                     lambda r: r.ok or r.answered)
            for r in results:
                attempts.append(r.attempt)
            won = next((r for r in results if r.ok or r.answered), None)
            if won is not None:
                won.got.attempts, won.got.response, won.got.passed = attempts, won.resp, passed
                return won.got
            holds.extend(r.hold_s for r in results if r.hold_s is not None)
            final = results[-1]
            last_error = final.error
            if final.cls is None:
                break
            backoff, steps = res.rule_for(final.cls)
        return Forwarded(attempts, last_error=last_error, passed=passed,
                         retry_after_s=self._limited(attempts, holds, passed))

    def _limited(self, attempts: list[Attempt], holds: list[float], passed: list[Passed]) -> float | None:
        """The soonest hold when every attempt was answered 429, or none was made and every refusal is a hold."""
        if attempts:
            return min(holds) if all(a.http_status == 429 for a in attempts) and holds else None
        board = self._breakers
        refused = [p.instance for p in passed if p.refused]
        if board is None or not refused:
            return None
        left = [board.held_for(i) for i in refused]
        return None if any(x is None for x in left) else min(x for x in left if x is not None)

    def _twin(self, call: _Call, targets: Sequence[InstanceSpec], tried: set[str], first: InstanceSpec,
              left: float | None, passed: list[Passed]) -> Awaitable[_Tried] | None:
        """The hedge of ``first``'s attempt: the next instance the breakers let through, else None."""
        abort = Abort()
        spec, adm = next_target(targets, tried, first, ("any",), self._breakers, abort.fire, passed, 1)
        if spec is None:
            return None
        tried.add(spec.id)
        return self._attempt(call, 1, spec, adm, abort, left)

    def _attempt(self, call: _Call, seq: int, spec: InstanceSpec, adm: Admission | None, abort: Abort,
                 left: float | None) -> Awaitable[_Tried]:
        """One attempt on ``spec``, counted in flight now (before any await: a burst of decisions sees it)."""
        # the name the upstream knows the model by (a hosted provider's own), else the fleet's
        call.body["model"] = spec.upstream_model or spec.model
        payload = orjson.dumps(call.body)  # now: a hedge sets another model on the same body
        ticket = None if self._inflight is None else self._inflight.begin(spec.id)
        headers = self._headers(spec, call.request_id, call.stream, call.authorization)
        span_id = None
        if call.trace is not None:
            span_id = call.trace.new_span_id()
            headers["traceparent"] = call.trace.traceparent(span_id)
            if call.trace.tracestate is not None:
                headers["tracestate"] = call.trace.tracestate
        return self._exchange(call, seq, spec, adm, abort, left, payload, headers, ticket, span_id)

    async def _exchange(self, call: _Call, seq: int, spec: InstanceSpec, adm: Admission | None, abort: Abort,
                        left: float | None, payload: bytes, headers: dict[str, str], ticket: Ticket | None,
                        span_id: str | None) -> _Tried:
        """Send, read (a stream: its first chunk), count and record one attempt.

        Cancelled (the client went away), it lets go of what it holds and raises; cancelled with
        :data:`~router_core.gateway.hedge.HEDGED_OUT`, or ended by ``abort`` with it (its twin, or
        the attempt it is the twin of, answered first), it returns its record as hedged out.
        """
        stream, board, limit = call.stream, self._breakers, call.limit
        started = self._perf()
        start_ms = None if call.origin is None else max(0.0, (started - call.origin) * 1e3)
        status, http_status, error = AttemptStatus.OK, None, None
        resp: UpstreamResponse | None = None
        got = Forwarded([], spec)
        answered = False  # an error status that is an answer: passed on, not retried, but not ok
        hold = None
        try:
            # A stream: no total, the first byte is timed here and the idle gaps by the relay.
            async with asyncio.timeout(limit if left is None else min(limit, left)) as abort.cm:
                resp = await self._pool.post(f"{spec.url}/v1/chat/completions", payload, headers,
                                             connect_timeout_s=self._settings.connect_timeout_s)
                http_status = resp.status
                if resp.status in _RETRYABLE:
                    if resp.status == 429:
                        hold = retry_after_s(resp.headers, self._wall())
                    await resp.read()
                    resp.release()
                    status, error = AttemptStatus.HTTP_ERROR, f"HTTP {resp.status}"
                elif stream and resp.status == 200:
                    got.first_chunk = await resp.content.readany()
                    got.first_byte_at = self._perf()
                    if not got.first_chunk:
                        raise _EmptyStream
                else:
                    got.body = await resp.read()
                    if resp.status >= 400:
                        status, error, answered = AttemptStatus.HTTP_ERROR, f"HTTP {resp.status}", True
        except TimeoutError:
            status, error = AttemptStatus.TIMEOUT, "first_byte_timeout" if stream else "timeout"
            if abort.fired:
                error = abort.reason
            elif left is not None and left < limit:
                error = "deadline_exceeded"
        except _EmptyStream:
            status, error = AttemptStatus.CONNECT_ERROR, "empty_stream"
        except (UpstreamError, OSError) as exc:
            status, error = AttemptStatus.CONNECT_ERROR, type(exc).__name__
        except BaseException as exc:  # cancelled: the connection is not reused
            self._let_go(resp, ticket, adm)
            if not (isinstance(exc, asyncio.CancelledError) and exc.args[:1] == (HEDGED_OUT,)):
                raise
            return self._hedged_out(seq, spec, got, started, span_id, start_ms)
        if error == HEDGED_OUT:  # ended by its abort: the attempt it is racing answered first
            self._let_go(resp, ticket, adm)
            return self._hedged_out(seq, spec, got, started, span_id, start_ms)
        cls = classify(status, http_status, stream, got.body if answered else b"")
        if answered and cls is not None and self._resilience.rule_for(cls)[1]:
            answered = False  # a context overflow or content filter answer with a fallback chain: retried
        ok = status is AttemptStatus.OK
        if not ok and not answered and resp is not None:
            resp.close()
        attempt = Attempt(seq=seq, instance=spec.id, model=spec.model, status=status, http_status=http_status,
                          error_class=error, latency_ms=(self._perf() - started) * 1e3, span_id=span_id,
                          start_ms=start_ms)
        self._view.observe(spec.id, attempt.latency_ms, (ok or answered) and (http_status or 0) < 500)
        if board is not None and adm is not None:
            board.done(adm, _outcome(status, http_status, abort.fired), hold_s=hold or 0.0)
        if ticket is not None:
            if ok and stream:
                got.open_stream = ticket
            else:
                self._inflight.end(ticket)  # type: ignore[union-attr]
        return _Tried(attempt, got, resp, ok, answered, cls, error, hold)

    def _let_go(self, resp: UpstreamResponse | None, ticket: Ticket | None, adm: Admission | None) -> None:
        """An attempt given up on: its connection closed (not reused), its in-flight count ended, its breaker told."""
        if resp is not None:
            resp.close()
        if ticket is not None:
            self._inflight.end(ticket)  # type: ignore[union-attr]
        if self._breakers is not None and adm is not None:
            self._breakers.done(adm, "aborted")

    def _hedged_out(self, seq: int, spec: InstanceSpec, got: Forwarded, started: float, span_id: str | None,
                    start_ms: float | None) -> _Tried:
        """The record of an attempt another one outran: a timeout whose error class is ``hedged_out``."""
        attempt = Attempt(seq=seq, instance=spec.id, model=spec.model, status=AttemptStatus.TIMEOUT,
                          error_class=HEDGED_OUT, latency_ms=(self._perf() - started) * 1e3, span_id=span_id,
                          start_ms=start_ms)
        return _Tried(attempt, got, None, False, False, None, HEDGED_OUT)


def _outcome(status: AttemptStatus, http_status: int | None, aborted: bool) -> AttemptOutcome:
    """What an attempt counts as for the breakers."""
    if aborted:
        return "aborted"
    if status is AttemptStatus.TIMEOUT:
        return "timeout"
    if status is AttemptStatus.CONNECT_ERROR:
        return "connect"
    if status is AttemptStatus.OK:
        return "ok"
    if http_status == 429:
        return "http_429"
    return "http_5xx" if (http_status or 0) >= 500 else "answered"

