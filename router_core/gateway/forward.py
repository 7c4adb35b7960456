"""Forwarding one request to the decided instances, trying the next one when an attempt fails.

The forwarder returns its attempts as values; the recorder turns them into trace steps.

One attempt (its timeouts, what it reads, its record) is :class:`~router_core.gateway.attempt_sender.AttemptSender`'s,
the base of :class:`Forwarder`; what forwarding gave back is :class:`~router_core.gateway.forwarded.Forwarded`.

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
from functools import partial
from typing import Any

from router_core.gateway.attempt_sender import AttemptSender, _Call, _Tried
from router_core.gateway.forwarded import Forwarded
from router_core.gateway.hedge import race
from router_core.gateway.http1 import Http1Pool
from router_core.gateway.trace_context import TraceContext
from router_core.resilience.breakers import BreakerBoard
from router_core.resilience.fallbacks import Abort, Passed, next_target
from router_core.rules.ir import TimeoutPolicy
from router_core.state.inflight import InflightCounter
from router_core.state.view import StateView
from schemas.config import GatewaySettings
from schemas.config.resilience import NextTarget, ResilienceSettings
from schemas.fleet import InstanceSpec
from schemas.trace import Attempt

__all__ = ["Forwarded", "Forwarder"]


class Forwarder(AttemptSender):
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

