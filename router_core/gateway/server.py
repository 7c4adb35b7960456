"""The gateway: its long-lived parts, their start and stop, and the routes that use them.

``POST /v1/chat/completions`` is :class:`router_core.gateway.chat.ChatRunner`, which takes each
request through the stages of :mod:`router_core.gateway.stages`; the other routes are in
``feedback``, ``dry_run`` and ``ops_routes``, each naming the parts it reads. What the gateway takes
in while it runs (a reloaded configuration, feedback and probe verdicts) is its base,
:class:`~router_core.gateway.gateway_updates.GatewayUpdates`. Storage is not this room's business:
traces leave through the injected :class:`TraceHooks` (``app/run/gateway_app.py`` plugs the ingest
emitter and store in).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry

from router_core.aio import cancel_all
from router_core.decide.router import Router
from router_core.experiments import ConfigWatcher, Experiment, RestartNeeded, build_experiment
from router_core.gateway import dry_run, ops_routes
from router_core.gateway.arm_gates import arm_gates
from router_core.gateway.auth import key_middleware, keys_from_env, upstream_keys
from router_core.gateway.callers import RequestIds, feedback_classes
from router_core.gateway.chat import ChatRunner
from router_core.gateway.errors import ParseErrorsJson, errors_middleware
from router_core.gateway.feedback import feedback
from router_core.gateway.finisher import TraceFinisher
from router_core.gateway.forward import Forwarder
from router_core.gateway.gateway_updates import GatewayUpdates
from router_core.gateway.header_check import HEADER_REFUSAL
from router_core.gateway.header_refusal import ChatHeaderRefusal
from router_core.gateway.hooks import TraceHooks
from router_core.gateway.openapi import GATEWAY_OPERATIONS, OpenApi
from router_core.gateway.policy_book import PolicyBook
from router_core.gateway.policy_gate import PolicyGate
from router_core.gateway.probe_source import ProbeSource
from router_core.gateway.stages.analyse import Lane
from router_core.gateway.trace_context import TraceIds
from router_core.gateway.verdicts import Verdicts
from router_core.metrics import GatewayMetrics, ModesMetrics, StageTimes
from router_core.resilience.affinity import AffinityBinder
from router_core.resilience.answer_cache import AnswerCache
from router_core.resilience.breakers import BreakerBoard
from router_core.resilience.budgets import BudgetTracker
from router_core.resilience.hub import BreakerHub
from router_core.resilience.router_modes import RouterModes
from router_core.shared.base import MemoryShared, SharedState
from router_core.state.inflight import InflightCounter
from router_core.state.inflight_share import InflightShare
from router_core.state.quality import QualityTable
from router_core.state.scrape_metrics import ScrapeMetrics
from router_core.state.scraper import MetricsScraper
from router_core.state.view import StateView
from schemas.common import RoutingMode
from schemas.config import RouteLensConfig
from schemas.records import RouterEvent

__all__ = ["Gateway", "TraceHooks"]

log = logging.getLogger(__name__)
_MODES = (RoutingMode.NORMAL.value, RoutingMode.STATIC.value, RoutingMode.SAFE.value)


class Gateway(GatewayUpdates):
    """Builds the aiohttp application and owns its client session and scraper.

    Args:
        config: The validated configuration.
        router: Ranks instances per request.
        hooks: Trace emitter and lookup.
        hash_key: Optional HMAC key for query hashes.
        new_id: Request id factory (injected for tests).
        wall: UTC clock for trace timestamps; perf: monotonic clock.
        clock: Monotonic seconds of the router's own modes (injected for tests).
        random_bytes: Source of trace and span ids (W3C trace context; tests seed it).
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
        registry: CollectorRegistry | None = None,
        probes: Callable[[Gateway], ProbeSource] | None = None,
        config_path: str | None = None,
        policy: PolicyGate | None = None,
        shared: SharedState | None = None,
        clock: Callable[[], float] = time.monotonic,
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self.config = config
        # The routing policy file (routing.policy): rules, chains, throttles; reloaded when the file changes.
        self.policy = policy or PolicyGate.load(config, hash_key=hash_key)
        self._policy_task: asyncio.Task[None] | None = None
        self.router = router
        self.hooks = hooks
        # The arms (and shadow) of config.experiments; swapped whole on reload (None: no experiment).
        self.experiment: Experiment | None = build_experiment(config, base=router, perf=perf)
        self.arm_gates = arm_gates(self.experiment, self.policy)  # arms with a routing section of their own
        self._config_path = config_path  # watched for changes to experiments and routing.intents when given
        self.watcher: ConfigWatcher | None = None
        self.restart_needed = RestartNeeded()  # what else a changed config file holds: said, and applied at restart
        self._watch_task: asyncio.Task[None] | None = None
        constraints = router.policy.constraints if self.experiment is None else self._constraints(self.experiment)
        self.inflight = InflightCounter()  # requests sent since each instance's scrape, for the pickers
        self.view = StateView(config.fleet.instances, constraints, scrape=config.scrape,
                              queue_cap=config.scoring.queue_norm, clock=perf, wall=wall,
                              open_attempts=self.inflight.open)  # an external instance's queue
        self.quality = QualityTable(config.models)
        self._hash_key = hash_key
        # A trace id per request (see router_core.gateway.callers), client ids claimed across workers that share.
        self.request_ids = RequestIds(new_id, None if shared is None or isinstance(shared, MemoryShared) else shared)
        self.classes = feedback_classes(config)
        self.wall = wall
        self.started_at = int(wall().timestamp())  # the models' created in /v1/models
        self._perf = perf
        self.registry = registry or CollectorRegistry()
        self.metrics = GatewayMetrics(self.registry)
        self._count_throttles()  # each gate's rules' throttles, in this registry (arm gates again on reload)
        self.finisher = TraceFinisher(lambda: self.hooks, self.metrics, self._perf)
        # Breakers (router_core.resilience.breakers): fed by attempts, read by the breaker filter, shared by replicas.
        self.shared: SharedState = shared if shared is not None else MemoryShared()
        res = config.resilience
        self.breakers = BreakerBoard(res.breakers, config.fleet.instances, clock=perf, enabled=res.enabled)
        self.breaker_hub = BreakerHub(self.breakers, self.shared, set_gauge=self._breaker_gauge,
                                      emit_event=hooks.record_event, wall=wall,
                                      router_version=config.router.version)
        self._specs = {s.id: s for s in config.fleet.instances}
        self._breaker_task: asyncio.Task[None] | None = None
        # Economics (issue #19): the router's own modes, degraded steps, session affinity, budgets.
        econ = config.economics
        self.modes_metrics = ModesMetrics(self.registry)
        self.router_modes = RouterModes(econ.router_modes, clock=clock, wall=wall, on_event=self._router_event,
                                        router_version=config.router.version)
        self.modes_metrics.record_mode(RoutingMode.NORMAL.value, _MODES, False)
        # Feedback: one verdict per request id, learned by every replica (router_core.gateway.verdicts).
        self.verdicts = Verdicts(self.shared, self._learn)
        self.budgets = BudgetTracker(econ.budgets, self.shared)
        self.affinity = AffinityBinder(econ.affinity, self.shared) if econ.affinity.is_enabled else None
        self.answers = AnswerCache(econ.degraded.cache, hash_key=hash_key)  # memory only, off by default
        self._budget_task: asyncio.Task[None] | None = None
        self._inflight_task: asyncio.Task[None] | None = None  # with workers: in-flight counts shared
        self._session: aiohttp.ClientSession | None = None
        self._forwarder: Forwarder | None = None
        self.scrape_task: asyncio.Task[None] | None = None
        self.scraper: MetricsScraper | None = None
        self.scrape_metrics = ScrapeMetrics(self.registry)
        # More exposition text for /metrics, read at each scrape: the prober it follows, the store serve started.
        self.metrics_sources: list[Callable[[], Awaitable[bytes]]] = []
        # Probe verdicts (a prober here, or a follower of one); built with this gateway's state view.
        self.probes: ProbeSource | None = None if probes is None else probes(self)
        # POST /v1/chat/completions: the stages of router_core.gateway.stages, run over these parts
        self.stage_times = StageTimes(self.registry) if config.gateway.stage_timers else None
        # The effective policies decided with, each stored once under the hash its traces carry.
        self.book = PolicyBook(self.policy, wall=wall, router_version=config.router.version,
                               record=hooks.record_policy, version_of=self._version_of)
        self._hash_shadow(self.experiment)
        self.openapi = OpenApi("RouteLens gateway", config.router.version, GATEWAY_OPERATIONS)
        self.chat = ChatRunner(
            config, base=Lane(router, config.router.version, None, self.policy),
            experiment=lambda: self.experiment, gates=lambda: self.arm_gates, policy=self.policy, view=self.view,
            inflight=self.inflight,
            quality=self.quality, modes=self.router_modes, affinity=self.affinity, budgets=self.budgets,
            answers=self.answers, breaker_hub=self.breaker_hub, forwarder=self._started_forwarder,
            finisher=self.finisher, book=self.book, metrics=self.metrics, times=self.stage_times,
            request_ids=self.request_ids, hash_key=hash_key, wall=wall, perf=perf,
            trace_ids=TraceIds(random_bytes, config.otel.sample_ratio if config.otel.enabled else 1.0))

    @property
    def perf(self) -> Callable[[], float]:
        """The monotonic clock (injected)."""
        return self._perf

    def _started_forwarder(self) -> Forwarder:
        assert self._forwarder is not None, "the application has not started"
        return self._forwarder

    @property
    def hash_key(self) -> str | None:
        """The HMAC key of query hashes (None: plain SHA-256)."""
        return self._hash_key

    def build_app(self) -> web.Application:
        """Return the aiohttp application with routes and lifecycle hooks.

        Keys are read from the environment here, so a named but unset variable fails the start
        (:class:`schemas.errors.ConfigError`) rather than the first request.
        """
        gw = self.config.gateway
        keys = keys_from_env(gw.api_keys_env, os.environ, "gateway.api_keys_env")
        self._upstream_keys = upstream_keys(self.config.fleet.instances, os.environ)
        ParseErrorsJson.install()  # a request aiohttp cannot parse: OpenAI's JSON 400, one warning line
        app = web.Application(middlewares=[errors_middleware], client_max_size=32 * 1024 * 1024)
        chat = app.router.add_post("/v1/chat/completions", self.chat.run)
        app[HEADER_REFUSAL] = ChatHeaderRefusal(self.chat, chat, keys)  # a header not UTF-8: traced like a refusal
        app.router.add_post("/v1/feedback", partial(feedback, self))
        app.router.add_post("/v1/router/decide", partial(dry_run.decide, self))
        app.router.add_get("/v1/models", partial(ops_routes.list_models, self))
        app.router.add_get("/v1/models/{model:.+}", partial(ops_routes.retrieve_model, self))
        app.router.add_get("/v1/router/state", partial(ops_routes.router_state, self))
        app.router.add_get("/health", partial(ops_routes.health, self))
        app.router.add_get("/metrics", partial(ops_routes.prometheus, self))
        app.router.add_get("/v1/alerts", partial(ops_routes.alerts, self))
        app.router.add_get("/v1/probes/verdicts", partial(ops_routes.probe_verdicts, self))
        self.openapi.add_route(app)  # GET /openapi.json (a server mounting more routes adds their operations)
        app.router.add_post("/v1/router/breakers/{scope}/{name}/close", partial(ops_routes.close_breaker, self))
        if keys is not None:
            # The gateway's own routes; the store's API, mounted later by app/, checks its own tokens.
            guarded = {r for r in app.router.resources() if r.canonical not in ("/health", "/metrics")}
            read = keys_from_env(self.config.storage.read_token_env, os.environ, "storage.read_token_env")
            app.middlewares.append(key_middleware(keys, lambda req: req.match_info.route.resource in guarded,
                                                  read_keys=read or ()))
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, app: web.Application) -> None:
        gw = self.config.gateway
        connector = aiohttp.TCPConnector(limit=gw.max_connections, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        self._forwarder = Forwarder(None, self.view, gw, keys=self._upstream_keys, perf=self._perf,
                                    inflight=self.inflight, breakers=self.breakers,
                                    resilience=self.config.resilience, wall=lambda: self.wall().timestamp())
        self._breaker_task = asyncio.create_task(self.breaker_hub.run())
        if (replica := self.shared.replica_id) is not None:  # workers sharing a Redis
            self._inflight_task = asyncio.create_task(InflightShare(self.inflight, self.shared, replica).run())
        sc = self.config.scrape
        self.scraper = scraper = MetricsScraper(
            self.config.fleet.instances, self.view, self._session, interval_s=sc.interval_s, timeout_s=sc.timeout_s,
            on_round=lambda: self.hooks.record_snapshots(list(self.view.snapshot().values())),
            metrics=self.scrape_metrics, clock=self._perf, wall=lambda: self.wall().timestamp(),
        )
        await scraper.scrape_once()  # route on real state from the first request on
        self.scrape_task = asyncio.create_task(scraper.run())
        self._policy_task = asyncio.create_task(self._watch_policies())
        if self._config_path is not None:
            self.watcher = ConfigWatcher(self._config_path, self.reload)
            self._watch_task = asyncio.create_task(self.watcher.run())
        if self.probes is not None:
            await self.probes.start()
        if self.budgets.is_enabled:
            self._budget_task = asyncio.create_task(self.budgets.run(self.wall))
    async def _watch_policies(self, interval_s: float = 1.0) -> None:
        """Reload the gateway's routing file, and each arm's own, whenever it changes; until cancelled.

        Their intents' routes files too: a changed one is refitted in the background.
        """
        while True:
            await asyncio.sleep(interval_s)
            for gate in (self.policy, *self.arm_gates.values()):
                gate.check()

    async def _stop(self, app: web.Application) -> None:
        self.finisher.flush()  # before the hooks' storage closes
        if self.probes is not None:
            await self.probes.stop()
        await cancel_all((self.scrape_task, self._watch_task, self._policy_task, self._breaker_task, self._budget_task,
                          self._inflight_task))
        if self._forwarder is not None:
            await self._forwarder.close()
        if self._session is not None:
            await self._session.close()

    def reload(self, config: RouteLensConfig) -> None:
        """:meth:`GatewayUpdates.reload`, then the arms' new gates count their throttles here too."""
        try:
            super().reload(config)
        finally:
            self._count_throttles()

    def _count_throttles(self) -> None:
        for gate in (self.policy, *self.arm_gates.values()):
            gate.count_throttles(self.metrics.throttles)

    def _router_event(self, event: RouterEvent) -> None:
        """A router mode switch: counted, logged, and handed to the hooks' ``record_event``."""
        self.modes_metrics.record_mode(self.router_modes.mode.value, _MODES, True)
        log.warning("%s", event.message)
        self.hooks.record_event(event)
