"""The gateway's operational routes: ``/v1/models``, ``/v1/router/state``, ``/metrics``, ``/health``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Protocol

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from router_core.decide.router import AUTO_MODEL, Router
from router_core.experiments import Experiment
from router_core.gateway.errors import error_response
from router_core.gateway.hooks import TraceHooks
from router_core.gateway.policy_book import PolicyBook
from router_core.gateway.policy_gate import PolicyGate
from router_core.gateway.probe_source import ProbeSource
from router_core.gateway.worker_metrics import WORKER_METRICS, WorkerMetrics
from router_core.metrics import GatewayMetrics, ModesMetrics
from router_core.resilience.affinity import AffinityBinder
from router_core.resilience.breakers import BreakerBoard
from router_core.resilience.budgets import BudgetTracker
from router_core.resilience.hub import BreakerHub
from router_core.resilience.router_modes import RouterModes
from router_core.shared.base import SharedState
from router_core.state.quality import QualityTable
from router_core.state.scraper import MetricsScraper
from router_core.state.view import StateView
from schemas.query_params import GivenTwice, one_value_each

__all__ = ["BREAKER_SCOPES", "HOOKS_HEALTH_TIMEOUT_S", "OpsParts", "add_worker_metrics", "alerts", "close_breaker",
           "health", "hooks_problem", "intents_problem", "list_models", "own_exposition", "probe_verdicts",
           "prometheus", "retrieve_model", "router_state", "scrape_problem"]

BREAKER_SCOPES = ("instance", "model", "zone")  # what POST /v1/router/breakers/{scope}/{name}/close takes
HOOKS_HEALTH_TIMEOUT_S = 5.0  # an async hooks health check (the store asked over loopback) past this is a reason


class OpsParts(Protocol):
    """What the operational routes read: all of the gateway's live state, which ``/v1/router/state`` shows."""

    router: Router
    view: StateView
    wall: Callable[[], datetime]
    started_at: int  # Unix seconds: the models' ``created``
    router_modes: RouterModes
    modes_metrics: ModesMetrics
    metrics: GatewayMetrics
    budgets: BudgetTracker
    affinity: AffinityBinder | None
    quality: QualityTable
    experiment: Experiment | None
    policy: PolicyGate
    breakers: BreakerBoard
    book: PolicyBook
    breaker_hub: BreakerHub
    shared: SharedState
    probes: ProbeSource | None
    metrics_sources: list[Callable[[], Awaitable[bytes]]]
    registry: CollectorRegistry
    scraper: MetricsScraper | None
    scrape_task: asyncio.Task[None] | None
    hooks: TraceHooks

    @property
    def perf(self) -> Callable[[], float]:
        """The monotonic clock."""


def _card(model: str, created: int) -> dict[str, object]:
    return {"id": model, "object": "model", "created": created, "owned_by": "routelens"}


async def list_models(gw: OpsParts, request: web.Request) -> web.Response:
    """OpenAI model list: ``auto`` and the fleet's models, ``created`` when this gateway started serving them."""
    data = [_card(m, gw.started_at) for m in (AUTO_MODEL, *gw.router.models)]
    return web.Response(body=orjson.dumps({"object": "list", "data": data}), content_type="application/json")


async def retrieve_model(gw: OpsParts, request: web.Request) -> web.Response:
    """``GET /v1/models/{model}`` (the SDK's ``models.retrieve``): one card, or OpenAI's 404 ``model_not_found``."""
    model = request.match_info["model"]
    if model != AUTO_MODEL and model not in gw.router.models:
        return error_response(404, f"The model '{model[:200]}' does not exist", param="model", code="model_not_found")
    return web.Response(body=orjson.dumps(_card(model, gw.started_at)), content_type="application/json")


async def router_state(gw: OpsParts, request: web.Request) -> web.Response:
    """The live state view, one snapshot per instance (``stale`` as of now), and the scrape loop's health."""
    views = gw.view.views()
    views["router_mode"] = gw.router_modes.state()  # the router's own breakers: normal, static or safe
    views["budgets"] = gw.budgets.state(gw.wall())  # spend per band in its current window
    views["affinity"] = None if gw.affinity is None else {"moves": gw.affinity.moves}
    if (scraper := gw.scraper) is not None:
        took = scraper.last_round_s()
        views["scrape"] = {"last_round_age_s": round(scraper.last_round_age_s(), 3),
                           "last_round_s": None if took is None else round(took, 3),
                           "interval_s": scraper.interval_s,
                           "source": "followed" if scraper.following else "own",  # worker 0's rounds, or its own
                           "stalled": scrape_problem(gw) is not None, "failing": scraper.failing()}
    views["quality"] = [{"model": m, "class": c, "p_correct": round(p, 4)} for (m, c), p in
                        sorted(gw.quality.snapshot().items())]
    views["quality_instances"] = gw.quality.instance_rows()  # per instance: verdicts, estimate, divergent
    if (exp := gw.experiment) is not None:  # the arms and shares in force (they change on reload)
        shadow = exp.shadow
        views["experiment"] = {
            "key": exp.arms.settings.key,
            "arms": [{"name": a.name, "router_version": a.router_version, "share": a.share,
                      "policy_hash": gw.book.hash_of(a.router.policy, a.name)} for a in exp.arms],
            "shadow": None if shadow is None else {"router_version": shadow.router_version, "arm": shadow.arm,
                                                   "policy_hash": shadow.policy_hash, "sample": shadow.sample},
        }
    views["policy_hash"] = gw.book.hash_of(gw.router.policy)  # the effective policy the base lane decides with
    if (rules := gw.policy.rules) is not None:  # the routing policy in force (the last good one on a bad reload)
        views["policy"] = {
            "file": rules.source, "hash": rules.hash, "timezone": rules.timezone,
            "rules": [{"name": r.name, "target": r.primary, "chain": list(rules.chain_of(r)), "origin": str(r.origin),
                       "throttle": None if r.throttle is None else {
                           "bucket": r.throttle.bucket or r.name, "rate": r.throttle.rate, "burst": r.throttle.burst,
                           "tokens": gw.policy.throttles.tokens(r.throttle.bucket or r.name)}}
                      for r in rules.rules],
            "reload_error": gw.policy.last_error,
        }
    if (live := gw.policy.live_intents) is not None:  # routing.intents: fitting, ready or failed; refits
        views["intents"] = live.state()
    if (watcher := getattr(gw, "watcher", None)) is not None:  # the configuration file's hot reload (--config)
        restart = getattr(gw, "restart_needed", None)  # changed sections a reload does not apply
        views["config"] = {"file": str(watcher.path), "reloads": watcher.reloads, "reload_error": watcher.last_error,
                           "restart_needed": [] if restart is None else list(restart.sections)}
    views["breakers"] = {"breakers": gw.breakers.views(), "events": list(gw.breaker_hub.events),
                         "shared": {"healthy": gw.shared.healthy, "problem": gw.shared.problem}}
    if (probes := gw.probes) is not None:
        feed = probes.feed()
        views["probes"] = {"source": feed["source"], "last_result_age_s": feed["last_result_age_s"],
                           "problem": probes.problem(), "alerts_active": len(probes.alerts())}
    shared = gw.policy.shared  # where replicas share state; Redis down: routing on local state, and said here
    views["shared"] = {"backend": shared.backend, "healthy": shared.healthy,
                       "problem": shared.problem}
    return web.Response(body=orjson.dumps(views), content_type="application/json")


async def close_breaker(gw: OpsParts, request: web.Request) -> web.Response:
    """``POST /v1/router/breakers/{scope}/{name}/close``: an operator confirms recovery (404: no such breaker).

    Guarded by the gateway's API keys like the other routes; ``?by=`` names the operator in the event
    (given twice, a 400 naming it).
    """
    scope, name = request.match_info["scope"], request.match_info["name"]
    if scope not in BREAKER_SCOPES:  # not a 404 "no cluster breaker named ...": the scope itself is wrong
        return error_response(400, f"scope must be one of {', '.join(BREAKER_SCOPES)}, not {scope[:64]!r}",
                              param="scope", code="invalid_parameter")
    try:
        by = one_value_each(request.query.items(), ("by",)).get("by", "api")[:64]
    except GivenTwice as exc:
        return error_response(400, str(exc), param=exc.param, code="invalid_parameter")
    if not await gw.breaker_hub.close(scope, name, by):
        return error_response(404, f"no {scope} breaker named {name[:200]!r}", code="not_found")
    b = gw.breakers.get(scope, name)
    return web.Response(body=orjson.dumps(None if b is None else b.view(gw.perf())), content_type="application/json")


async def alerts(gw: OpsParts, request: web.Request) -> web.Response:
    """``GET /v1/alerts``: the probes' active (firing or pending) alerts; empty when nothing probes."""
    active = [] if gw.probes is None else gw.probes.alerts()
    return web.Response(body=orjson.dumps({"alerts": active}), content_type="application/json")


async def probe_verdicts(gw: OpsParts, request: web.Request) -> web.Response:
    """``GET /v1/probes/verdicts``: the feed other gateways follow (404 when this one has no probes)."""
    if gw.probes is None:
        return error_response(404, "this gateway runs no prober (probes.enabled is false)", code="not_found")
    return web.Response(body=orjson.dumps(gw.probes.feed()), content_type="application/json")


async def prometheus(gw: OpsParts, request: web.Request) -> web.Response:
    """Prometheus text exposition of the gateway's registry, and of the processes it republishes (if any).

    Those are the prober the gateway follows (the one ``serve`` started or ``probes.follow_url``;
    the series of its last answer while it does not answer) and the store process that ``serve``
    started: so scraping the gateway is enough. One of several workers (:func:`add_worker_metrics`)
    answers for all of them, each worker's series labelled ``worker``; the republished series
    appear once, unlabelled. The other workers and those processes are asked at once.
    """
    republished = asyncio.gather(*(source() for source in gw.metrics_sources))
    workers = request.app.get(WORKER_METRICS)
    body = own_exposition(gw) if workers is None else await workers.exposition()
    return web.Response(body=body + b"".join(await republished), headers={"Content-Type": CONTENT_TYPE_LATEST})


def own_exposition(gw: OpsParts) -> bytes:
    """This gateway process's own series (its registry, the gauges read at scrape time brought up to date).

    Those are the budgets', the misroute share and the fleet's (each instance's KV cache and latches).
    """
    gw.modes_metrics.record_budgets(gw.budgets.state(gw.wall()))
    gw.modes_metrics.record_misroutes(gw.router_modes.misroute_rate())
    gw.metrics.fleet.record(gw.view.snapshot().values())
    return generate_latest(gw.registry)


def add_worker_metrics(gw: OpsParts, app: web.Application, worker: int, ports: Sequence[int]) -> None:
    """Make ``app``'s ``/metrics`` answer for every worker of ``serve --workers N`` (N = ``len(ports)``).

    ``gw``'s own series are served on 127.0.0.1:``ports[worker]`` while ``app`` runs, and its
    ``/metrics`` merges them with the other workers' (:mod:`router_core.gateway.worker_metrics`).
    """
    WorkerMetrics(worker, ports, partial(own_exposition, gw)).mount(app)


async def health(gw: OpsParts, request: web.Request) -> web.Response:
    """200 ``{"status": "ok"}``, or 503 ``{"status": "degraded", "reason": ...}``, with the storage state.

    ``storage`` (the spool's state, the records waiting) is there when the hooks tell it
    (:meth:`TraceHooks.storage_state` not None), and
    ``intents`` (``fitting``, ``ready`` or ``failed``) when ``routing.intents`` is configured: still
    200 while fitting (requests are served; those for ``auto`` wait for the fit), 503 once
    the fit failed and no fitted classifier serves.
    Degraded while the scrape loop has stopped or stalled, or while the hooks report a problem
    with where the traces go: :meth:`TraceHooks.health` (a reason, or None when fine), plain or
    ``async`` (bounded here by :data:`HOOKS_HEALTH_TIMEOUT_S`). The
    ingest pipeline's says so while its spool takes no record (traces held in memory only: a
    crash would lose them; the gateway still answers), while the store's writes keep failing,
    and while the store process a gateway relays to is unreachable or itself degraded.
    """
    reasons = [r for r in (scrape_problem(gw), await hooks_problem(gw), intents_problem(gw)) if r]
    state = gw.hooks.storage_state()  # the trace pipeline's; None: the hooks have nothing to tell
    extra: dict[str, object] = {} if state is None else {"storage": state}
    if (live := gw.policy.live_intents) is not None:
        extra["intents"] = live.status
    if not reasons:
        return web.Response(body=orjson.dumps({"status": "ok", **extra}), content_type="application/json")
    body = orjson.dumps({"status": "degraded", "reason": "; ".join(reasons), **extra})
    return web.Response(status=503, body=body, content_type="application/json")


def intents_problem(gw: OpsParts) -> str | None:
    """Why semantic intents cannot classify (the fit failed and no fitted classifier serves), or None."""
    live = gw.policy.live_intents
    if live is None or live.status != "failed":
        return None
    return f"intents fit failed: {live.fit_error or live.reload_error}"


def scrape_problem(gw: OpsParts) -> str | None:
    """Why the scrape loop is unhealthy (stopped or stalled), or None."""
    task, scraper = gw.scrape_task, gw.scraper
    if task is not None and task.done():
        return "scrape loop stopped"
    return None if scraper is None else scraper.stall_reason()


async def hooks_problem(gw: OpsParts) -> str | None:
    """The trace hooks' own health reason (spool unavailable, store failing or unreachable...), or None."""
    try:
        reason = gw.hooks.health()
        if inspect.isawaitable(reason):
            reason = await asyncio.wait_for(reason, HOOKS_HEALTH_TIMEOUT_S)
    except TimeoutError:
        return f"trace hooks health check did not answer within {HOOKS_HEALTH_TIMEOUT_S:g}s"
    except Exception as exc:  # a broken health check is itself a reason, never a 500
        return f"trace hooks health check failed: {type(exc).__name__}"
    return reason if isinstance(reason, str) and reason else None
