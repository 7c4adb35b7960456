"""``POST /v1/chat/completions``: the runner that takes one request through the stages (:mod:`.stages`).

A request is one :class:`~router_core.gateway.chat_call.Call` (what was asked, what is known so far);
how it ends (answered and charged, answered without an instance, refused, its trace finished) is
:class:`~router_core.gateway.chat_endings.ChatEndings`, the runner's base. The runner calls the stages
in order, counts the event loop's CPU time in each when ``gateway.stage_timers`` is on
(``routelens_gateway_stage_cpu_seconds``; off, nothing is timed), awaits only what can wait (a
throttle, a session binding, the embedding path), and is the only writer of the request's
:class:`~router_core.decide.recorder.TraceRecorder`: stages return what they found and the runner
records it. Every request that gets past its request id produces exactly one trace, whatever its
outcome, refused ones included (with the features known so far).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

import orjson
from aiohttp import web

from router_core.decide.analysis import analyse_request
from router_core.decide.decision import Decision, DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.decide.router import CONTEXT_LENGTH_EXCEEDED, Router
from router_core.errors import AttemptsExhausted, InvalidRequest, NoFeasibleInstance, RoutingError
from router_core.experiments import Experiment
from router_core.gateway.arm_gates import SHADOW
from router_core.gateway.callers import RequestIds, check_context
from router_core.gateway.chat_call import Call
from router_core.gateway.chat_endings import ChatEndings
from router_core.gateway.degraded import answer_from
from router_core.gateway.errors import UpstreamRateLimited, error_for, status_of
from router_core.gateway.finisher import TraceFinisher
from router_core.gateway.forward import Forwarder
from router_core.gateway.policy_book import PolicyBook
from router_core.gateway.policy_gate import PolicyGate
from router_core.gateway.stages import admit, analyse, decide, degrade, respond, screen
from router_core.gateway.streaming import ask_for_usage
from router_core.gateway.trace_context import TraceIds
from router_core.metrics import GatewayMetrics, StageTimes
from router_core.resilience.affinity import AffinityBinder
from router_core.resilience.answer_cache import AnswerCache
from router_core.resilience.budgets import BudgetTracker
from router_core.resilience.hub import BreakerHub
from router_core.resilience.router_modes import RouterModes
from router_core.rules.route import expected_tokens
from router_core.state.inflight import InflightCounter
from router_core.state.quality import QualityTable
from router_core.state.view import StateView
from schemas.common import AttemptStatus
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSnapshot
from schemas.hashing import query_hash

__all__ = ["CLIENT_CLOSED", "Call", "ChatRunner"]

CLIENT_CLOSED = 499  # a trace's status for a request whose client left before its body was read (nginx's)


class ChatRunner(ChatEndings):
    """Runs the chat route's stages over the gateway's parts, each given explicitly.

    ``experiment`` and ``forwarder`` are read per request: the experiment is swapped whole on a
    reload, the forwarder exists once the application has started.
    """

    def __init__(self, config: RouteLensConfig, *, base: analyse.Lane, experiment: Callable[[], Experiment | None],
                 gates: Callable[[], Mapping[str, PolicyGate]],
                 policy: PolicyGate, view: StateView, inflight: InflightCounter, quality: QualityTable,
                 modes: RouterModes, affinity: AffinityBinder | None, budgets: BudgetTracker, answers: AnswerCache,
                 breaker_hub: BreakerHub, forwarder: Callable[[], Forwarder], finisher: TraceFinisher,
                 book: PolicyBook, metrics: GatewayMetrics, times: StageTimes | None, request_ids: RequestIds,
                 hash_key: str | None,
                 wall: Callable[[], datetime], perf: Callable[[], float], trace_ids: TraceIds | None = None) -> None:
        self.config = config
        self._base = base
        self._experiment = experiment
        self._gates = gates
        self.policy = policy
        self.view = view
        self.inflight = inflight
        self.quality = quality
        self.modes = modes
        self.affinity = affinity
        self.budgets = budgets
        self.answers = answers
        self.breaker_hub = breaker_hub
        self._forwarder = forwarder
        self.finisher = finisher
        self.book = book
        self.metrics = metrics
        self.times = times
        self.request_ids = request_ids
        self._hash_key = hash_key
        self.wall = wall
        self.perf = perf
        self.trace_ids = trace_ids or TraceIds()

    def lane(self, request_id: str, headers: Mapping[str, str], body: Any) -> analyse.Lane:
        """Who decides this request: its experiment arm's router, or the base one (see :func:`.stages.analyse.lane`).

        Raises:
            InvalidRequest: The forcing header names no arm.
        """
        return analyse.lane(self._experiment(), self._base, self._gates(), request_id, headers, body)

    def _shadow_gate(self, request_id: str) -> PolicyGate | None:
        """The shadow's own gate when it has one and wants this request (None: it decides on the live route)."""
        gate = self._gates().get(SHADOW)
        if gate is None:  # the common case: no shadow with rules of its own
            return None
        exp = self._experiment()
        if exp is None or exp.shadow is None or not exp.shadow.wants(request_id):
            return None
        return gate

    def _state(self) -> Mapping[str, InstanceSnapshot]:
        """The state as this process sees it now: the last scrape, plus the requests sent since."""
        return self.inflight.adjust(self.view.snapshot())

    async def run(self, http: web.Request) -> web.StreamResponse:
        """Route, forward and trace one chat-completions request (refused ones are traced too)."""
        perf, times = self.perf, self.times  # times None: stage timers off (gateway.stage_timers)
        t0 = perf()
        c0 = times.clock() if times is not None else 0.0
        given = http.headers.get("X-Request-Id", "")
        request_id, refused = self.request_ids.of(given)
        if request_id == given and self.request_ids.shared is not None:  # a client's id: another worker's?
            request_id = await self.request_ids.claimed(given)
        call = Call(http, request_id, t0, trace=self.trace_ids.context(http.headers))
        try:
            if refused is not None:
                raise refused
            call.body, refusal = await screen.screen(http, self.policy)
            if times is not None:
                t1 = times.add("screen", c0, times.clock())
            if refusal is not None:
                return self.refuse(call, refusal.status, refusal.message, refusal.code, refusal.param,
                                    refusal.headers())
            analysis = analyse_request(call.body, max_chars=self.config.router.analyse_max_chars,
                                       attachments=self.config.routing.attachments)
            lane = self.lane(request_id, http.headers, call.body)
        except orjson.JSONDecodeError:
            return self.refuse(call, 400, "request body is not valid JSON", "invalid_json")
        except web.HTTPRequestEntityTooLarge:
            return self.refuse(call, 413, "request body is too large", "request_too_large")
        except ConnectionError:  # the client left before its body was read: traced, answered to no one
            return self.refuse(call, CLIENT_CLOSED, "the client closed the connection", respond.CLIENT_GONE)
        except InvalidRequest as exc:
            status, code = status_of(exc)
            return self.refuse(call, status, str(exc), code, exc.param)
        ts, call.origin = self.wall(), perf()
        gate = lane.gate
        u = await analyse.understand(gate, analysis, call.body, http.headers, ts, self.view.snapshot) \
            if analyse.runs(gate, analysis) else analyse.unruled(analysis)
        if (shadow_gate := self._shadow_gate(request_id)) is not None:  # the query is gone once analysed
            call.shadow = await analyse.understand(shadow_gate, analysis, call.body, http.headers, ts,
                                                   self.view.snapshot)
        call.rec = rec = TraceRecorder(
            request_id=request_id, ts=ts, router_version=lane.version,
            policy_hash=self.book.hash_of(lane.router.policy, lane.arm, gate),
            query_hash=query_hash(analysis.query_text, self._hash_key), features=analysis.features,
            intent=u.intent, intent_confidence=u.confidence, experiment_arm=lane.arm, arm_forced=lane.forced,
            otel=call.otel,
        )
        call.answer_key = self.answers.key(analysis.features.requested_model, analysis.query_text, call.body)
        attachments = analysis.attachments  # their types and sizes: no bytes are kept
        del analysis  # the query text goes no further than its hash (and the conditions, in memory)
        if times is not None:
            t2 = times.add("analyse", t1, times.clock())
        try:
            route, throttled = u.choice, None
            if not admit.unthrottled(route):  # only a rule's throttle can make the request wait
                admitted = await admit.admit(gate, route)
                route, throttled = admitted.route, admitted.refusal
            rec.record_policy(route, u.extra)
            if throttled is not None:
                raise throttled
            bound = None if self.affinity is None else await admit.bind(
                self.affinity, lane.router, http, call.body, rec.features, route, self._state)
            ctx = admit.context(
                request_id=request_id, features=rec.features, intent=rec.intent, now=ts, route=route, bound=bound,
                attachments=attachments, router=lane.router, modes=self.modes, budgets=self.budgets,
                quality=self.quality, breakers=self.breaker_hub.board, accepts=self.config.routing.attachments)
            if times is not None:
                times.add("admit", t2, times.clock())
            return await self._serve(call, ctx, lane.router)
        except (InvalidRequest, RoutingError) as exc:
            status, code = status_of(exc)
            self.finish(rec, t0, status, code)
            return error_for(exc, headers=self.headers_of(rec))

    async def _serve(self, call: Call, ctx: DecisionContext, router: Router, *, decided: Decision | None = None,
                     ) -> web.StreamResponse:
        """Decide, forward and answer; routing failures are raised for :meth:`run` to map.

        ``decided``: a degraded step's new decision (see :mod:`router_core.gateway.stages.degrade`).
        """
        times, rec, body = self.times, call.rec, call.body
        assert rec is not None
        t3 = times.clock() if times is not None else 0.0
        su = call.shadow
        shadow_ctx = None if su is None else replace(ctx, route=su.choice, intent=su.intent)
        got = decide.decide(router, ctx, self.view, self.inflight, self._experiment(), decided=decided,
                            shadow_ctx=shadow_ctx)
        decision = got.decision
        if decided is None:
            self.modes.observe_decision(decision.decision_ms)
            self.metrics.record_no_feasible(ctx.features.requested_model, decision.rule, decision.no_feasible)
        rec.record_decision(decision)
        if decision.no_feasible == CONTEXT_LENGTH_EXCEEDED:  # no window holds it: a pinned model's 400, not fail-open
            judged = {c["instance"] for c in decision.candidates}
            check_context(ctx.features, [s for s in router.policy.fleet if s.id in judged])
        rec.defer_shadow(got.shadow)  # decided once the answer is on its way, on the same context and state
        self.metrics.record_decision(decision.decision_ms / 1e3, decision.fallback_reason is not None)
        t4 = times.add("decide", t3, times.clock()) if times is not None else 0.0
        if not decision.targets and decision.degraded is None:
            out = await degrade.degrade(self.config.economics.degraded, decision, body, ctx, got.state,
                                        router.decide, answers=self.answers, answer_key=call.answer_key,
                                        request_id=rec.request_id, pool=lambda: self._forwarder().pool,
                                        gateway=self.config.gateway, trace=call.trace)
            if times is not None:
                times.add("degrade", t4, times.clock())
            if out.recorded is not None:
                rec.record_decision(out.recorded)
            if out.redecided is not None:
                call.body, call.answer_key = out.body, None
                return await self._serve(call, out.ctx, router, decided=out.redecided)
            if out.answer is None:
                if (held := self._held_out(decision)) is not None:  # not unservable: rate limited for a while
                    raise UpstreamRateLimited(f"every instance is held out after its upstream's 429 ({out.reason})",
                                              retry_after_s=held, instance=None)
                raise NoFeasibleInstance(out.reason)
            rec.record_degraded(out.responder)
            return self._answer(call, out.answer, {"x-request-id": rec.request_id})
        stream = bool(body.get("stream"))
        client_usage = ask_for_usage(body) if stream else False
        rule = ctx.route.rule if ctx.route is not None else None
        if self.finisher.validates:  # runs once the request is out, while the instance works
            asyncio.get_running_loop().call_soon(rec.prebuild)
        forwarder = self._forwarder()
        fwd = await forwarder.forward(body, decision.targets, rec.request_id, self.config.gateway.max_attempts,
                                      authorization=call.http.headers.get("Authorization"),
                                      timeout=None if rule is None else rule.timeout, trace=call.trace,
                                      origin=call.origin)
        rec.record_attempts(fwd.attempts, fwd.passed, fwd.answered)
        await self.breaker_hub.drain()  # transitions the attempts caused: metrics, events, other replicas
        t5 = times.add("forward", t4, times.clock()) if times is not None else 0.0
        if (fwd.spec is None or fwd.response is None) and (target := decision.degraded) is not None:
            gw = self.config.gateway  # a rule chain's non-LLM end answers
            answer = await answer_from(target, body, rec.request_id, forwarder.pool,
                                       timeout_s=gw.upstream_timeout_s, connect_timeout_s=gw.connect_timeout_s,
                                       trace=call.trace)
            if times is not None:
                times.add("degrade", t5, times.clock())
            if answer.error is not None:
                raise AttemptsExhausted(f"the degraded target {target.name} failed ({answer.error})",
                                        last_error=answer.error)
            rec.record_degraded(target.name)
            rec.mark_degraded(f"answered by degraded target {target.name}")
            return self._answer(call, answer, None)
        if (fwd.spec is None or fwd.response is None) and fwd.retry_after_s is not None:
            last = fwd.attempts[-1].instance if fwd.attempts else None
            raise UpstreamRateLimited(f"rate limited upstream ({fwd.failure()})", retry_after_s=fwd.retry_after_s,
                                      instance=last)
        if fwd.spec is None or fwd.response is None:
            timed_out = bool(fwd.attempts) and all(a.status is AttemptStatus.TIMEOUT for a in fwd.attempts)
            raise AttemptsExhausted(f"no instance could serve the request ({fwd.failure()})",
                                    last_error=fwd.last_error, retry=not timed_out)
        spec = fwd.spec
        expected = expected_tokens(spec.cost, ctx.features) if spec.cost.per_token else (0, 0)
        cost = router.policy.price(spec.cost, ctx.now, *expected)  # at the request's time: peak hours add the surge
        await self._served(call, ctx, spec, cost)
        relayed = await respond.relay_answer(
            call.http, fwd, self.headers_of(rec), call.t0, stream=stream, client_usage=client_usage,
            idle_timeout_s=self.config.gateway.idle_timeout_s, inflight=self.inflight, answers=self.answers,
            answer_key=call.answer_key, cost=cost)
        if spec.cost.per_token:
            self._priced_by_usage(relayed.usage, router, ctx, spec, expected, cost)
        if times is None:
            self.finish(rec, call.t0, relayed.status, relayed.error, **relayed.usage)
            return relayed.response
        t6 = times.add("respond", t5, times.clock())
        self.finish(rec, call.t0, relayed.status, relayed.error, **relayed.usage)
        times.add("finish", t6, times.clock())
        return relayed.response
