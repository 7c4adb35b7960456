"""The gateway: ``POST /v1/chat/completions`` routed by :class:`router_core.router.Router`.

Storage is not this room's business: traces leave through the injected :class:`TraceHooks`
(``app/serve.py`` plugs the ingest emitter and store in). Every request that gets past JSON
parsing produces exactly one trace, whatever its outcome.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry

from router_core.aio import cancel_all
from router_core.analysis import analyse_request
from router_core.attachments import refuse_unacceptable
from router_core.decision import Decision, DecisionContext
from router_core.errors import AttemptsExhausted, InvalidRequest, NoFeasibleInstance, RoutingError, Throttled
from router_core.experiments import ConfigWatcher, Experiment, build_experiment
from router_core.gateway import dry_run, ops_routes
from router_core.gateway.auth import key_middleware, keys_from_env, upstream_keys
from router_core.gateway.callers import RequestIds, SeenIds, check_context, feedback_classes, rejected_features
from router_core.gateway.degrade import degrade
from router_core.gateway.degraded import DegradedAnswer, answer_from
from router_core.gateway.errors import error_for, error_response, errors_middleware, status_of
from router_core.gateway.feedback import feedback
from router_core.gateway.finisher import TraceFinisher
from router_core.gateway.forward import Forwarder
from router_core.gateway.hooks import TraceHooks
from router_core.gateway.http1 import Http1Pool
from router_core.gateway.placement import bound_instance, context_candidates
from router_core.gateway.policy_gate import PolicyGate
from router_core.gateway.probe_source import ProbeSource
from router_core.gateway.respond import relay_answer
from router_core.gateway.streaming import ask_for_usage
from router_core.inflight import InflightCounter
from router_core.metrics import GatewayMetrics, ModesMetrics
from router_core.quality import QualityTable
from router_core.recorder import TraceRecorder
from router_core.resilience.affinity import AffinityBinder, session_key
from router_core.resilience.answer_cache import AnswerCache
from router_core.resilience.breakers import BreakerBoard
from router_core.resilience.budgets import BudgetTracker
from router_core.resilience.hub import BreakerHub
from router_core.resilience.router_modes import RouterModes
from router_core.resilience.shared import MemoryShared, SharedState
from router_core.router import AUTO_MODEL, Router
from router_core.scrape_metrics import ScrapeMetrics
from router_core.scraper import MetricsScraper
from router_core.state import StateView
from schemas.common import ProbeKind, ProbeVerdict, RoutingMode
from schemas.config import ConstraintSpec, RouteLensConfig
from schemas.fleet import InstanceSpec
from schemas.hashing import query_hash
from schemas.probe import ProbeStatus
from schemas.records import RouterEvent

__all__ = ["Gateway", "TraceHooks"]

log = logging.getLogger(__name__)
_MODES = (RoutingMode.NORMAL.value, RoutingMode.STATIC.value, RoutingMode.SAFE.value)


class Gateway:
    """Builds the aiohttp application and owns its client session and scraper.

    Args:
        config: The validated configuration.
        router: Ranks instances per request.
        hooks: Trace emitter and lookup.
        hash_key: Optional HMAC key for query hashes.
        new_id: Request id factory (injected for tests).
        wall: UTC clock for trace timestamps; perf: monotonic clock.
    """

    def __init__(
        self,
        config: RouteLensConfig,
        router: Router,
        hooks: TraceHooks,
        *,
        hash_key: str | None = None,
        new_id: Callable[[], str] = lambda: "req_" + os.urandom(10).hex(),  # 80 random bits
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        perf: Callable[[], float] = time.perf_counter,
        policy_hash: str | None = None,
        registry: CollectorRegistry | None = None,
        probes: Callable[[Gateway], ProbeSource] | None = None,
        config_path: str | None = None,
        policy: PolicyGate | None = None,
        shared: SharedState | None = None,
    ) -> None:
        self.config = config
        # The routing policy file (routing.policy): rules, chains, throttles; reloaded when the file changes.
        self.policy = policy or PolicyGate.load(config, config_path)
        self._policy_task: asyncio.Task[None] | None = None
        self.router = router
        self.hooks = hooks
        # The arms (and shadow) of config.experiments; swapped whole on reload (None: no experiment).
        self.experiment: Experiment | None = build_experiment(config, base=router, perf=perf)
        self._config_path = config_path  # watched for changes to the experiments section when given
        self.watcher: ConfigWatcher | None = None
        self._watch_task: asyncio.Task[None] | None = None
        constraints = router.policy.constraints if self.experiment is None else self._constraints(self.experiment)
        self.view = StateView(config.fleet.instances, constraints, scrape=config.scrape,
                              queue_cap=config.scoring.queue_norm, clock=time.monotonic, wall=wall)
        self.quality = QualityTable(config.models)
        self.inflight = InflightCounter()  # requests sent since each instance's scrape, for the pickers
        self._policy_hash = policy_hash or router.policy.hash
        self._hash_key = hash_key
        self.request_ids = RequestIds(new_id)  # a trace id per request (see router_core.gateway.callers)
        self.verdicts = SeenIds()  # request ids with a feedback verdict (one each)
        self.classes = feedback_classes(config)
        self.wall = wall
        self._perf = perf
        self.registry = registry or CollectorRegistry()
        self.metrics = GatewayMetrics(self.registry)
        self.finisher = TraceFinisher(lambda: self.hooks, self.metrics, self._perf)
        # Breakers (router_core.resilience.breakers): fed by attempts, read by the breaker filter, shared by replicas.
        self.shared: SharedState = shared if shared is not None else MemoryShared()
        res = config.resilience
        self.breakers = BreakerBoard(res.breakers, config.fleet.instances, clock=perf, enabled=res.enabled)
        self.breaker_hub = BreakerHub(self.breakers, self.shared, set_gauge=self._breaker_gauge,
                                      emit_event=getattr(hooks, "record_event", None), wall=wall,
                                      router_version=config.router.version)
        self._bind_breakers()
        self._specs = {s.id: s for s in config.fleet.instances}
        self._breaker_task: asyncio.Task[None] | None = None
        # Economics (issue #19): the router's own modes, degraded steps, session affinity, budgets.
        econ = config.economics
        self.modes_metrics = ModesMetrics(self.registry)
        self.router_modes = RouterModes(econ.router_modes, wall=wall, on_event=self._router_event,
                                        router_version=config.router.version)
        self.modes_metrics.record_mode(RoutingMode.NORMAL.value, _MODES, False)
        self.budgets = BudgetTracker(econ.budgets, self.shared)
        self.affinity = AffinityBinder(econ.affinity, self.shared) if econ.affinity.is_enabled else None
        self.answers = AnswerCache(econ.degraded.cache, hash_key=hash_key)  # memory only, off by default
        self._budget_task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._forwarder: Forwarder | None = None
        self.scrape_task: asyncio.Task[None] | None = None
        self.scraper: MetricsScraper | None = None
        self.scrape_metrics = ScrapeMetrics(self.registry)
        # Probe verdicts (a prober here, or a follower of one); built with this gateway's state view.
        self.probes: ProbeSource | None = None if probes is None else probes(self)

    @property
    def perf(self) -> Callable[[], float]:
        """The monotonic clock (injected)."""
        return self._perf

    @property
    def upstream_pool(self) -> Http1Pool:
        """The upstream connection pool (started with the app)."""
        assert self._forwarder is not None
        return self._forwarder.pool

    @property
    def hash_key(self) -> str | None:
        """The HMAC key of query hashes (None: plain SHA-256)."""
        return self._hash_key

    def _constraints(self, experiment: Experiment) -> list[ConstraintSpec]:
        """The base policy's constraints, then any other arm's or the shadow's (once per name)."""
        specs = {c.name: c for c in self.router.policy.constraints}
        routers = [a.router for a in experiment.arms] + ([experiment.shadow.router] if experiment.shadow else [])
        for r in routers:
            for c in r.policy.constraints:
                specs.setdefault(c.name, c)
        return list(specs.values())

    def _breaker_gauge(self, scope: str, name: str, state: int) -> None:
        self.metrics.record_breaker(scope, name, state)

    def _bind_breakers(self) -> None:
        """Give every router's breaker filter (the base policy's, the arms', the shadow's) this board."""
        routers = [self.router]
        if (exp := self.experiment) is not None:
            routers += [a.router for a in exp.arms] + ([exp.shadow.router] if exp.shadow else [])
        for r in routers:
            BreakerHub.bind(self.breakers, r.policy.filters)

    def reload(self, config: RouteLensConfig) -> None:
        """Take a changed configuration's ``experiments`` section: arms, shares and shadow (the rest needs a restart).

        Keys whose bucket stays in their arm's range keep their arm (see
        :mod:`router_core.experiments.assign`). Constraints new to every arm have no latch in the
        state view until a restart; their filters then judge the snapshot as it is.

        Raises:
            ConfigError: The new section's policies do not load; the running experiment stays.
        """
        merged = self.config.model_copy(update={"experiments": config.experiments})
        self.experiment = build_experiment(merged, base=self.router, perf=self._perf)
        self.config = merged
        self._bind_breakers()

    def apply_probe(self, status: ProbeStatus, instance: str) -> None:
        """Take a probe verdict into the state view (the ``probe`` filter reads it from the snapshot).

        Passing verdicts in a row close the instance's open breakers (``close_after`` of each).
        When a syntax or semantic verdict returns to ``ok`` after a change, the instance's learned
        quality is forgotten: its feedback described the fault the probes now see cured, and a
        flagged instance would otherwise get too little traffic to ever earn its way back.
        """
        self.view.set_probe(status, instance)
        if status.verdict is ProbeVerdict.OK and status.flaps and status.kind is not ProbeKind.LATENCY:
            self.quality.forget(instance)
        spec = self._specs.get(instance)
        if spec is not None:  # seed 003's recovery: consecutive probe passes close the instance's and model's breakers
            self.breakers.probe_passed(spec, status.verdict is ProbeVerdict.OK)

    def build_app(self) -> web.Application:
        """Return the aiohttp application with routes and lifecycle hooks.

        Keys are read from the environment here, so a named but unset variable fails the start
        (:class:`schemas.errors.ConfigError`) rather than the first request.
        """
        gw = self.config.gateway
        keys = keys_from_env(gw.api_keys_env, os.environ, "gateway.api_keys_env")
        self._upstream_keys = upstream_keys(self.config.fleet.instances, os.environ)
        app = web.Application(middlewares=[errors_middleware], client_max_size=32 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_post("/v1/feedback", partial(feedback, self))
        app.router.add_post("/v1/router/decide", partial(dry_run.decide, self))
        app.router.add_get("/v1/models", partial(ops_routes.list_models, self))
        app.router.add_get("/v1/router/state", partial(ops_routes.router_state, self))
        app.router.add_get("/health", partial(ops_routes.health, self))
        app.router.add_get("/metrics", partial(ops_routes.prometheus, self))
        app.router.add_get("/v1/alerts", partial(ops_routes.alerts, self))
        app.router.add_get("/v1/probes/verdicts", partial(ops_routes.probe_verdicts, self))
        app.router.add_post("/v1/router/breakers/{scope}/{name}/close", partial(ops_routes.close_breaker, self))
        if keys is not None:
            # The gateway's own routes; the store's API, mounted later by app/, checks its own tokens.
            guarded = {r for r in app.router.resources() if r.canonical not in ("/health", "/metrics")}
            app.middlewares.append(key_middleware(keys, lambda req: req.match_info.route.resource in guarded))
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, app: web.Application) -> None:
        gw = self.config.gateway
        connector = aiohttp.TCPConnector(limit=gw.max_connections, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        self._forwarder = Forwarder(None, self.view, gw, keys=self._upstream_keys, perf=self._perf,
                                    inflight=self.inflight, breakers=self.breakers,
                                    resilience=self.config.resilience)
        self._breaker_task = asyncio.create_task(self.breaker_hub.run())
        sc = self.config.scrape
        self.scraper = scraper = MetricsScraper(
            self.config.fleet.instances, self.view, self._session, interval_s=sc.interval_s, timeout_s=sc.timeout_s,
            on_round=lambda: self.hooks.record_snapshots(list(self.view.snapshot().values())),
            metrics=self.scrape_metrics, clock=self._perf, wall=lambda: self.wall().timestamp(),
        )
        await scraper.scrape_once()  # route on real state from the first request on
        self.scrape_task = asyncio.create_task(scraper.run())
        if self.policy.path is not None:
            self._policy_task = asyncio.create_task(self.policy.watch())
        if self._config_path is not None:
            self.watcher = ConfigWatcher(self._config_path, self.reload)
            self._watch_task = asyncio.create_task(self.watcher.run())
        if self.probes is not None:
            await self.probes.start()
        if self.budgets.is_enabled:
            self._budget_task = asyncio.create_task(self.budgets.run(self.wall))

    async def _stop(self, app: web.Application) -> None:
        self.finisher.flush()  # before the hooks' storage closes
        if self.probes is not None:
            await self.probes.stop()
        await cancel_all((self.scrape_task, self._watch_task, self._policy_task, self._breaker_task, self._budget_task))
        if self._forwarder is not None:
            await self._forwarder.close()
        if self._session is not None:
            await self._session.close()

    def _refuse(self, request_id: str, t0: float, body: Any, status: int, message: str, code: str | None,
                param: str | None = None, headers: dict[str, str] | None = None) -> web.Response:
        """Answer a request refused before routing, with its trace (the features known so far)."""
        rec = TraceRecorder(request_id=request_id, ts=self.wall(), router_version=self.config.router.version,
                            policy_hash=self._policy_hash, query_hash=query_hash("", self._hash_key),
                            features=rejected_features(body))
        self.finish(rec, t0, status, code)
        return error_response(status, message, param=param, code=code,
                              headers={**(headers or {}), "x-request-id": request_id})

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        """Route, forward and trace one chat-completions request (refused ones are traced too)."""
        t0 = self._perf()
        request_id, refused = self.request_ids.of(request.headers.get("X-Request-Id", ""))
        body: Any = None
        try:
            if refused is not None:
                raise refused
            body = orjson.loads(await request.read())
            # throttles and prefilter (router_core.resilience): 429 / 400 before any analysis
            if isinstance(body, dict) and (r := await self.policy.screen(body, request.headers, request.remote)):
                return self._refuse(request_id, t0, body, r.status, r.message, r.code, r.param, r.headers())
            analysis = analyse_request(body, max_chars=self.config.router.analyse_max_chars,
                                       attachments=self.config.routing.attachments)
            router, version, p_hash, arm = self._arm(request_id, request, body)
        except orjson.JSONDecodeError:
            return self._refuse(request_id, t0, None, 400, "request body is not valid JSON", "invalid_json")
        except web.HTTPRequestEntityTooLarge:
            return self._refuse(request_id, t0, None, 413, "request body is too large", "request_too_large")
        except InvalidRequest as exc:
            status, code = status_of(exc)
            return self._refuse(request_id, t0, body, status, str(exc), code, exc.param)
        attachments = analysis.attachments  # their types and sizes: no bytes are kept
        ts = self.wall()
        u = None
        if self.policy.active and analysis.features.requested_model == AUTO_MODEL:
            u = await self.policy.understand(analysis, body, request.headers, ts, self.view.snapshot)
        intent = (u.intent, u.confidence) if u is not None else (analysis.intent.cls, analysis.intent.confidence)
        rec = TraceRecorder(
            request_id=request_id,
            ts=ts,
            router_version=version,
            policy_hash=p_hash,
            query_hash=query_hash(analysis.query_text, self._hash_key),
            features=analysis.features,
            intent=intent[0],
            intent_confidence=intent[1],
            experiment_arm=arm,
        )
        choice = None if u is None else u.choice
        if u is not None:
            rec.policy_extra = u.extra
        answer_key = self.answers.key(analysis.features.requested_model, analysis.query_text)
        del analysis  # the query text goes no further than its hash (and the conditions, in memory)
        try:
            rec.route, admission = await self.policy.admit(choice)
            if admission.action == "reject":
                raise Throttled(f"rule {rec.route.rule.name if rec.route and rec.route.rule else '?'} is throttled",
                                retry_after_s=admission.retry_after_s)
            self.router_modes.tick()
            bound = (None if self.affinity is None
                     else await bound_instance(self.affinity, self.router, request, body, rec.features, rec.route,
                                               lambda: self.inflight.adjust(self.view.snapshot())))
            ctx = DecisionContext(request_id=request_id, features=rec.features, intent=rec.intent, now=rec.ts,
                                  quality=self.quality.snapshot(), route=rec.route, mode=self.router_modes.choice(),
                                  affinity=bound, budget=self.budgets.view(rec.ts) if self.budgets.is_enabled else None)
            # an input no candidate's context window holds is refused, not forwarded
            ends = context_candidates(self.router, rec.features.requested_model, rec.route)
            check_context(rec.features, ends)
            # an attachment type no candidate's model accepts is refused, not forwarded
            refuse_unacceptable(attachments, self.config.routing.attachments, [s.model for s in ends])
            return await self._serve(request, body, ctx, rec, t0, router, answer_key=answer_key)
        except (InvalidRequest, RoutingError) as exc:
            status, code = status_of(exc)
            self.finish(rec, t0, status, code)
            return error_for(exc, headers=self.headers_of(rec))

    def _router_event(self, event: RouterEvent) -> None:
        """A router mode switch: counted, logged, and handed to the hooks' ``record_event`` when they have one."""
        self.modes_metrics.record_mode(self.router_modes.mode.value, _MODES, True)
        log.warning("%s", event.message)
        emit = getattr(self.hooks, "record_event", None)
        if callable(emit):
            emit(event)

    def _arm(self, request_id: str, request: web.Request, body: Any) -> tuple[Router, str, str, str | None]:
        """The router, version label, policy hash and arm name serving this request.

        Raises:
            InvalidRequest: The forcing header names no arm.
        """
        exp = self.experiment
        if exp is None:
            return self.router, self.config.router.version, self._policy_hash, None
        arm, _ = exp.arms.pick(request_id, request.headers, body)
        return arm.router, arm.router_version, arm.policy_hash, arm.name

    def headers_of(self, rec: TraceRecorder) -> dict[str, str]:
        """``x-request-id``, and the model and instance chosen whenever a decision was made."""
        headers = {"x-request-id": rec.request_id}
        if (chosen := rec.selected) is not None:
            headers["x-routelens-model"], headers["x-routelens-instance"] = chosen
        return headers

    def finish(self, rec: TraceRecorder, t0: float, status: int, error: str | None = None, **usage: Any) -> None:
        """Count the request and emit its one trace, durable before the answer is sent (see TraceFinisher)."""
        self.finisher.finish(rec, t0, status, error, **usage)

    async def _served(self, request: web.Request, body: Any, ctx: DecisionContext, spec: InstanceSpec) -> None:
        """An instance answers: its call counts against the budgets; a moved session is rebound to it."""
        if self.budgets.is_enabled:
            self.budgets.record(spec.model, spec.cost.base, ctx.now)
        if self.affinity is not None and ctx.affinity is not None and ctx.affinity != spec.id:
            key = session_key(self.affinity.settings, request.headers, body)
            if key is not None:
                await self.affinity.move(key, spec.id)

    async def _serve(self, request: web.Request, body: dict[str, Any], ctx: DecisionContext, rec: TraceRecorder,
                     t0: float, router: Router, *, decided: Decision | None = None,
                     answer_key: str | None = None) -> web.StreamResponse:
        """Decide, forward and answer; routing failures are raised for :meth:`chat_completions` to map.

        ``decided``: a degraded step's decision (see :mod:`router_core.gateway.degrade`).
        """
        state = self.inflight.adjust(self.view.snapshot())
        decision = decided or router.decide(ctx, state)
        if decided is None:
            self.router_modes.observe_decision(decision.decision_ms)
        rec.record_decision(decision)
        if self.experiment is not None and (shadow := self.experiment.shadow) is not None:
            rec.pending_shadow = shadow.job(ctx, state, decision)  # same context and state as the live decision
        self.metrics.record_decision(decision.decision_ms / 1e3, decision.fallback_reason is not None)
        assert self._forwarder is not None
        if not decision.targets and decision.degraded is None:
            out = await degrade(self.config.economics.degraded, decision, body, ctx, state, router.decide,
                                answers=self.answers, answer_key=answer_key, request_id=rec.request_id,
                                pool=lambda: self.upstream_pool, gateway=self.config.gateway)
            if out.recorded is not None:
                rec.record_decision(out.recorded)
            if out.redecided is not None:
                return await self._serve(request, out.body, out.ctx, rec, t0, router, decided=out.redecided)
            if out.answer is None:
                raise NoFeasibleInstance(out.reason)
            rec.degraded_used = out.responder
            return self._answer(rec, t0, out.answer, {"x-request-id": rec.request_id})
        stream = bool(body.get("stream"))
        client_usage = ask_for_usage(body) if stream else False
        rule = ctx.route.rule if ctx.route is not None else None
        if self.finisher.validates:  # runs once the request is out, while the instance works
            asyncio.get_running_loop().call_soon(rec.prebuild)
        fwd = await self._forwarder.forward(body, decision.targets, rec.request_id, self.config.gateway.max_attempts,
                                            authorization=request.headers.get("Authorization"),
                                            timeout=None if rule is None else rule.timeout)
        rec.record_attempts(fwd.attempts)
        await self.breaker_hub.drain()  # transitions the attempts caused: metrics, events, other replicas
        if (fwd.spec is None or fwd.response is None) and (target := decision.degraded) is not None:
            gw = self.config.gateway  # a rule chain's non-LLM end answers
            answer = await answer_from(target, body, rec.request_id, self.upstream_pool,
                                       timeout_s=gw.upstream_timeout_s, connect_timeout_s=gw.connect_timeout_s)
            if answer.error is not None:
                raise AttemptsExhausted(f"the degraded target {target.name} failed ({answer.error})",
                                        last_error=answer.error)
            rec.degraded_used = target.name
            rec.mark_degraded(f"answered by degraded target {target.name}")
            return self._answer(rec, t0, answer, None)
        if fwd.spec is None or fwd.response is None:
            raise AttemptsExhausted(f"no instance could serve the request (last error: {fwd.last_error})",
                                    last_error=fwd.last_error)
        await self._served(request, body, ctx, fwd.spec)
        got = await relay_answer(request, fwd, self.headers_of(rec), t0, stream=stream, client_usage=client_usage,
                                 idle_timeout_s=self.config.gateway.idle_timeout_s, inflight=self.inflight,
                                 answers=self.answers, answer_key=answer_key)
        self.finish(rec, t0, got.status, got.error, **got.usage)
        return got.response

    def _answer(self, rec: TraceRecorder, t0: float, answer: DegradedAnswer,
                headers: dict[str, str] | None) -> web.Response:
        """Finish the trace of a request answered without an instance; ``headers`` None: :meth:`headers_of`."""
        self.finish(rec, t0, answer.status)
        return web.Response(status=answer.status, body=answer.payload, content_type=answer.content_type,
                            headers=self.headers_of(rec) if headers is None else headers)
