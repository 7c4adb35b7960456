"""How the chat runner ends a request, and the one trace each request ends with.

An instance answered: its call counts against the budgets, a moved session is rebound to it, and
with token prices the answer's ``usage`` sets its cost. No instance answered: an answer without one
(a degraded step's), or, when every candidate is held out after its upstream's 429, how long.
Refused before routing: an error with its trace (the features known so far). :class:`ChatEndings`
is the base of :class:`~router_core.gateway.chat.ChatRunner`, which sets the parts it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from router_core.decide.decision import Decision, DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.decide.router import Router
from router_core.gateway.callers import rejected_features
from router_core.gateway.chat_call import Call
from router_core.gateway.degraded import DegradedAnswer
from router_core.gateway.errors import error_response
from router_core.gateway.finisher import TraceFinisher
from router_core.gateway.policy_book import PolicyBook
from router_core.gateway.stages import analyse
from router_core.resilience.affinity import AffinityBinder, session_key
from router_core.resilience.budgets import BudgetTracker
from router_core.resilience.hub import BreakerHub
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSpec
from schemas.hashing import query_hash

__all__ = ["ChatEndings"]


class ChatEndings:
    """Every way :class:`~router_core.gateway.chat.ChatRunner` ends a request.

    The runner's constructor sets these parts.
    """

    config: RouteLensConfig
    _base: analyse.Lane
    affinity: AffinityBinder | None
    budgets: BudgetTracker
    breaker_hub: BreakerHub
    finisher: TraceFinisher
    book: PolicyBook
    _hash_key: str | None
    wall: Callable[[], datetime]

    def _held_out(self, decision: Decision) -> float | None:
        """The soonest hold when every candidate is held out after its upstream's 429 (None: any other reason)."""
        board = self.breaker_hub.board
        left = [board.held_for(c["instance"]) for c in decision.candidates]
        return min(x for x in left if x is not None) if left and None not in left else None

    async def _served(self, call: Call, ctx: DecisionContext, spec: InstanceSpec, cost: float) -> None:
        """An instance answers: its call counts against the budgets at ``cost``; a moved session is rebound to it."""
        if self.budgets.is_enabled:
            self.budgets.record(spec.model, cost, ctx.now)
        if self.affinity is not None and ctx.affinity is not None and ctx.affinity != spec.id:
            key = session_key(self.affinity.settings, call.http.headers, call.body)
            if key is not None:
                await self.affinity.move(key, spec.id)

    def _priced_by_usage(self, usage: dict[str, Any], router: Router, ctx: DecisionContext, spec: InstanceSpec,
                         expected: tuple[int, int], cost: float) -> None:
        """With token prices, the outcome's cost from the answer's ``usage`` (the expected tokens where it says none).

        The budgets' spend takes the difference from the expected price they counted when it was served.
        """
        if usage.get("cost") is None:
            return  # no answer to price
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        actual = router.policy.price(spec.cost, ctx.now, expected[0] if prompt is None else prompt,
                                     expected[1] if completion is None else completion)
        usage["cost"] = actual
        if self.budgets.is_enabled and actual != cost:
            self.budgets.record(spec.model, actual - cost, ctx.now, calls=0)

    def _answer(self, call: Call, answer: DegradedAnswer, headers: dict[str, str] | None) -> web.Response:
        """Finish the trace of a request answered without an instance; ``headers`` None: :meth:`headers_of`."""
        assert call.rec is not None
        self.finish(call.rec, call.t0, answer.status)
        return web.Response(status=answer.status, body=answer.payload, content_type=answer.content_type,
                            headers=self.headers_of(call.rec) if headers is None else headers)

    def refuse(self, call: Call, status: int, message: str, code: str | None, param: str | None = None,
               headers: dict[str, str] | None = None) -> web.Response:
        """Answer a request refused before routing, with its trace (the features known so far)."""
        rec = TraceRecorder(request_id=call.request_id, ts=self.wall(), router_version=self.config.router.version,
                            policy_hash=self.book.hash_of(self._base.router.policy, None, self._base.gate),
                            query_hash=query_hash("", self._hash_key),
                            features=rejected_features(call.body), otel=call.otel)
        self.finish(rec, call.t0, status, code)
        return error_response(status, message, param=param, code=code,
                              headers={**(headers or {}), "x-request-id": call.request_id})

    @staticmethod
    def headers_of(rec: TraceRecorder) -> dict[str, str]:
        """``x-request-id``, and the model and instance that answered whenever one did."""
        headers = {"x-request-id": rec.request_id}
        if (chosen := rec.answered) is not None:
            headers["x-routelens-model"], headers["x-routelens-instance"] = chosen
        return headers

    def finish(self, rec: TraceRecorder, t0: float, status: int, error: str | None = None, **usage: Any) -> None:
        """Count the request and emit its one trace (see TraceFinisher).

        Durable before a whole answer is sent; a stream's trace is finished after its last chunk.
        """
        self.finisher.finish(rec, t0, status, error, **usage)
