"""One attempt of a forwarded request: its headers, its exchange with one instance, and its record.

The upstream call goes through :class:`router_core.gateway.http1.Http1Pool` (keep-alive HTTP/1.1,
httptools parsing; see there why not aiohttp's client). A non-stream attempt has a connect timeout
and a total (``gateway.upstream_timeout_s``); its body
is read whole, as bytes in the upstream's coding (``router_core.gateway.encoding`` decides what the
client gets). A stream attempt has a connect timeout and a time-to-first-byte timeout and no total:
it succeeds once its first chunk has arrived, which the forwarder reads, so that a failure before
it is a failed attempt and the next instance is tried; ``router_core.gateway.streaming`` relays the
rest. An error status other than the retryable ones is an answer: its body is read and passed on.

:class:`AttemptSender` is the base of :class:`~router_core.gateway.forward.Forwarder`, which sets
the parts it reads and runs the loop over the ranked instances; each attempt comes back as a
``_Tried``, the breakers count it as :func:`_outcome` says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from router_core.gateway.encoding import UPSTREAM_ACCEPT
from router_core.gateway.errors import retry_after_s
from router_core.gateway.forwarded import Forwarded
from router_core.gateway.hedge import HEDGED_OUT
from router_core.gateway.http1 import Http1Pool, UpstreamError, UpstreamResponse
from router_core.gateway.trace_context import TraceContext
from router_core.resilience.breakers import Admission, AttemptOutcome, BreakerBoard
from router_core.resilience.fallbacks import Abort, classify
from router_core.state.inflight import InflightCounter, Ticket
from router_core.state.view import StateView
from schemas.common import AttemptStatus
from schemas.config import GatewaySettings
from schemas.config.resilience import ErrorClass, ResilienceSettings
from schemas.fleet import InstanceSpec
from schemas.trace import Attempt

__all__ = ["AttemptSender"]

_RETRYABLE = {429, 500, 502, 503, 504}


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


class AttemptSender:
    """Sends one attempt and records it: the half of :class:`~router_core.gateway.forward.Forwarder` under its loop.

    The forwarder's constructor sets these parts (see its arguments).
    """

    _pool: Http1Pool
    _view: StateView
    _settings: GatewaySettings
    _keys: dict[str, str]
    _perf: Callable[[], float]
    _wall: Callable[[], float]
    _inflight: InflightCounter | None
    _breakers: BreakerBoard | None
    _resilience: ResilienceSettings

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

