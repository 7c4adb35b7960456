"""The gateway application of one ``serve`` process: its trace pipeline, store hooks and query API.

Traces, feedback and quarantine records leave the gateway through one :class:`TraceEmitter`
(durable spool first). By default (``storage.separate_process``, and always with several workers)
a separate ``routelens store`` process writes the trace file and answers the query API the app
reads: the emitter relays to it (:class:`RelaySink`), and this process forwards the query API to
it (:func:`add_store_proxy`), since DuckDB admits one writing process per file. Only with
``--store-in-process`` (one worker) does this process open the store (DuckDB or Elasticsearch)
itself, write to it and answer the query API (``ingest.http_api``). The processes around it (store,
prober, other workers) are :mod:`app.run.serve`'s.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from app.run.access import hash_key_of, read_token_of
from app.run.gc_tuning import tame_gc
from app.run.probe_child import probe_source
from app.run.scrape_share import ScrapeShare
from app.run.siblings import SiblingTraces
from app.run.storage import (
    RELAY_TOKEN_ENV,
    open_store,
    pipeline_paths,
    quarantine_in,
    say_backlog,
    say_store,
    worker_paths,
)
from ingest import (
    OTEL_EXPORTER,
    STORE_OPERATIONS,
    EmitterCollector,
    HttpTraceStore,
    IngestApi,
    OtelCollector,
    RelaySink,
    TraceEmitter,
    TraceStore,
    add_relay_route,
    add_store_proxy,
    build_otel_sink,
)
from router_core import (
    Gateway,
    MetricsScraper,
    PolicyGate,
    RedisShared,
    SharedCollector,
    add_worker_metrics,
    build_router,
    build_shared,
)
from schemas.config import RouteLensConfig
from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.policy_record import PolicyRecord
from schemas.records import RouterEvent
from schemas.trace import DecisionTrace

__all__ = ["GATEWAY", "STARTED_AT_ENV", "StoreHooks", "build_gateway_app"]

GATEWAY = web.AppKey("routelens.gateway", Gateway)  # the application's gateway (its shutdown reaches its parts)
# Set by the serve that starts several workers (Unix seconds): every worker's /v1/models says the same ``created``
STARTED_AT_ENV = "ROUTELENS_STARTED_AT"
# How long GET /v1/feedback waits for this worker's undelivered records (relayed every 500 ms); then the store answers
FEEDBACK_SETTLE_S = 2.0


class StoreHooks:
    """Trace hooks for the gateway: emit through the pipeline, look up pending then stored traces.

    ``siblings``: the other workers of ``serve --workers N``, asked for a trace they have not
    delivered yet when neither this worker nor the store has it (:meth:`lookup_elsewhere`).
    ``relay``: the sink to the store process the traces go to, if any (its health is the gateway's).
    Every member of :class:`router_core.gateway.TraceHooks` has something to do here: traces come
    as plain values (``takes_plain``), which the store validates.
    """

    takes_plain = True  # the pipeline's store validates what it stores: the gateway builds no trace model

    def __init__(self, emitter: TraceEmitter, store: TraceStore, siblings: SiblingTraces | None = None,
                 relay: RelaySink | None = None) -> None:
        self.emitter = emitter
        self.store = store
        self.siblings = siblings
        self.relay = relay

    async def health(self) -> str | None:
        """Why ``/health`` is 503 for storage: this pipeline's problem, then the store process's, or None."""
        reasons = [self.emitter.health(), None if self.relay is None else await self.relay.store_problem()]
        return "; ".join(r for r in reasons if r) or None

    def emit(self, trace: DecisionTrace) -> bool:
        """Queue a trace for storage (durable once this returns)."""
        return self.emitter.emit(trace)

    def emit_plain(self, values: dict[str, Any]) -> bool:
        """Queue a trace given as plain values; validated by the store (see ``TraceEmitter.emit_plain``)."""
        return self.emitter.emit_plain(values)

    def storage_state(self) -> dict[str, Any]:
        """The trace pipeline's state, for ``/health``."""
        return self.emitter.storage_state()

    def lookup(self, request_id: str) -> DecisionTrace | None:
        """Read-your-writes lookup."""
        return self.emitter.pending(request_id) or self.store.get(request_id)

    async def lookup_elsewhere(self, request_id: str) -> DecisionTrace | None:
        """After :meth:`lookup` missed: a sibling worker's pending trace, else the store's once more.

        The store again, because a sibling may have delivered the trace between the store's answer
        and its own (a worker forgets a pending trace only once the store has it).
        """
        if self.siblings is None:
            return None
        return await self.siblings.find(request_id) or await asyncio.to_thread(self.store.get, request_id)

    def record_feedback(self, feedback: Feedback) -> None:
        """Queue feedback through the same durable pipeline."""
        self.emitter.emit(feedback)

    def has_stored_verdict(self, request_id: str) -> bool:
        """Whether a verdict on ``request_id`` is stored or on its way there (given before this gateway started, say).

        On its way: in this gateway's pipeline (spooled, not yet relayed or written; what its spool held
        from before this start included), then in the store's (``settle=False``: a store process answers
        from what it has written and from the verdicts it has received and not written yet). Asked in
        that order, each forgets a verdict only once the next holds it. Nothing is written for the
        question: asked on every verdict, a forced write each time would turn the store's 2 s writes into
        one a verdict. Only when this pipeline cannot tell (more than ``PENDING_VERDICTS`` wait in it)
        does it deliver what it holds first, waiting up to ``FEEDBACK_SETTLE_S``.

        Raises what the store's read raises when it cannot answer (``SinkError`` from a store process).
        """
        waiting = self.emitter.pending_verdicts(request_id)
        if waiting:
            return True
        if waiting is None:
            self.emitter.flush(FEEDBACK_SETTLE_S)
        return bool(self.store.feedback(request_id, settle=False))  # no write forced a verdict

    def record_snapshots(self, snapshots: list[InstanceSnapshot]) -> None:
        """Queue a scrape round's snapshots (the instance timeline; traces then point at them)."""
        for snap in snapshots:
            self.emitter.emit(snap)

    def record_policy(self, record: PolicyRecord) -> None:
        """Queue an effective policy, stored once under the hash its traces carry."""
        self.emitter.emit(record)

    def record_event(self, event: RouterEvent) -> None:
        """Queue a router event (a breaker or router-mode transition) through the same pipeline."""
        self.emitter.emit(event)


async def _hold_replayed(gateway: Gateway, request_ids: Sequence[str]) -> None:
    """Claim the requests of the verdicts this gateway's spool held at its start (an ``on_startup`` step)."""
    await gateway.verdicts.hold(request_ids)


def _scraper_of(gateway: Gateway) -> MetricsScraper:
    """The gateway's scraper, which its start (an earlier startup step) has made."""
    if gateway.scraper is None:
        raise RuntimeError("the gateway has not started its scraper")
    return gateway.scraper


def build_gateway_app(config: RouteLensConfig, db_path: str, *, store_url: str | None = None,
                      worker: int = 0, probe_url: str | None = None, config_path: str | None = None,
                      own_store: bool = False, metrics_ports: Sequence[int] = (),
                      sibling_ports: Sequence[int] = (), workers: int = 1) -> web.Application:
    """Build the gateway application with its trace pipeline and the store's query API.

    Args:
        config: The configuration.
        db_path: The DuckDB trace file.
        store_url: The store process to relay records to and to forward the query API to (what
            ``run_server`` starts); None keeps the store in this process (one-process embedding).
        worker: This gateway's number among the workers (names its spool).
        probe_url: The prober process to follow (``serve`` starts it); None probes here when enabled.
        config_path: The file ``config`` came from: watched, its ``experiments`` section reloaded on change.
        own_store: ``store_url`` is the store ``serve`` started: its series are republished on this
            gateway's ``/metrics`` (``routelens_store_*``). A store of your own is scraped itself.
        metrics_ports: Every worker's private metrics port, by worker number, when there are
            several: this worker serves its own series on ``metrics_ports[worker]`` and its
            ``/metrics`` answers for them all, labelled ``worker`` (see ``add_worker_metrics``).
        sibling_ports: Every worker's private port for sibling lookups, by worker number, when
            there are several (and a store process): a lookup by request id that misses here and
            in the store asks the other workers for their pending trace (:mod:`app.run.siblings`).
        workers: The gateway processes ``serve`` runs: the shared state's replica count until Redis
            answers (with Redis down from the start, each worker takes its share of every bucket).
    """
    st = config.storage
    store: TraceStore
    # otel: each gateway process exports its own decisions as spans (best-effort, beside the store)
    otel = build_otel_sink(config.otel, public_url=config.app.public_url, version=config.router.version)
    exporters = {} if otel is None else {OTEL_EXPORTER: otel}
    relay: RelaySink | None = None
    if store_url is None:
        say_store(st, db_path)
        store = open_store(st, db_path)
        spool_dir, quarantine_dir = pipeline_paths(st, db_path)
        emitter = TraceEmitter(store, st, exporters=exporters, spool_dir=spool_dir,
                               quarantine=quarantine_in(st, quarantine_dir)).start()
    else:
        store = HttpTraceStore(store_url, token=read_token_of(st))
        spool_dir, quarantine_dir = worker_paths(st, db_path, worker)
        relay = RelaySink(store_url, token=os.environ.get(RELAY_TOKEN_ENV) or None)
        emitter = TraceEmitter(relay, st, exporters=exporters, spool_dir=spool_dir,
                               quarantine=quarantine_in(st, quarantine_dir)).start()
    say_backlog(emitter, spool_dir)
    hash_key = hash_key_of(config)
    registry = CollectorRegistry()
    registry.register(EmitterCollector(emitter))
    if otel is not None:
        registry.register(OtelCollector(otel.stats))
    # shared.backend: redis -> the replicas' buckets, breakers, bindings
    shared = build_shared(config.shared, replicas=max(1, workers))
    registry.register(SharedCollector(shared))
    relay_token = os.environ.get(RELAY_TOKEN_ENV)
    siblings = None  # the other workers' pending traces: read-your-writes whichever worker a lookup reaches
    if store_url is not None and len(sibling_ports) > 1 and relay_token:
        siblings = SiblingTraces(worker, sibling_ports, emitter.pending, relay_token)
    gateway = Gateway(
        config,
        build_router(config, metrics=registry),  # plugin durations on the gateway's /metrics
        StoreHooks(emitter, store, siblings, relay),
        hash_key=hash_key,
        registry=registry,
        probes=probe_source(config, db_path, emitter, registry, probe_url),
        config_path=config_path,
        policy=PolicyGate.load(config, shared=shared, hash_key=hash_key),
        shared=shared,
    )
    if (started := os.environ.get(STARTED_AT_ENV, "")).isdigit():  # one start time, whichever worker answers
        gateway.started_at = int(started)
    app = gateway.build_app()
    app[GATEWAY] = gateway
    if len(metrics_ports) > 1:  # a scrape of the shared port, whichever worker answers, shows every worker
        add_worker_metrics(gateway, app, worker, metrics_ports)
    if siblings is not None:
        # worker 0 scrapes for every worker, on the same private port (app.run.scrape_share)
        share = ScrapeShare(worker, sibling_ports, relay_token or "")
        app.on_cleanup.append(lambda _: share.close())  # before the private endpoint stops: it waits for the streams
        siblings.mount(app, more=share.routes)
        app.on_startup.append(lambda _: share.attach(_scraper_of(gateway)))
    gateway.openapi.operations.extend(STORE_OPERATIONS)  # served here in-process, or forwarded to the store
    if isinstance(shared, RedisShared):  # connects (or says why not) and listens to the other replicas
        app.on_startup.append(lambda _: shared.start())
        app.on_cleanup.append(lambda _: shared.close())
    if replayed := emitter.replayed_verdicts:  # verdicts given before this start, still in the spool
        # claimed (in Redis when shared) before requests come: a second one is a 409 through any worker
        app.on_startup.append(lambda _: _hold_replayed(gateway, replayed))
    if store_url is None:
        token = os.environ.get(st.intake_token_env) if st.intake_token_env else None
        IngestApi(emitter, store, token=token or None, max_body=st.intake_max_bytes,
                  read_token=read_token_of(st), body_timeout_s=config.gateway.body_timeout_s).add_routes(app)
        if relay_token and probe_url is not None:
            add_relay_route(app, emitter, token=relay_token,  # the prober's results reach the store here
                            body_timeout_s=config.gateway.body_timeout_s)
    else:
        store_metrics = add_store_proxy(app, store_url, emitter.pending, read_token=read_token_of(st),
                                        elsewhere=None if siblings is None else siblings.find,
                                        body_timeout_s=config.gateway.body_timeout_s,
                                        intake_max_bytes=st.intake_max_bytes,  # the store's limit, not chat's
                                        settle=lambda: asyncio.to_thread(emitter.flush, FEEDBACK_SETTLE_S))
        if own_store:
            gateway.metrics_sources.append(store_metrics)

    async def close_emitter(_: web.Application) -> None:
        # Stores what it can in 2 s; the rest is durable in the spool and replayed at the next start, and a
        # process told to stop because its parent died must go promptly (the demo's kill -9 test: 2 s).
        emitter.close(timeout_s=2.0)

    async def settle_gc(_: web.Application) -> None:
        tame_gc()  # after start-up: see app.run.gc_tuning for the tail it removes

    app.on_startup.append(settle_gc)

    async def name_worker(_: web.Request, response: web.StreamResponse) -> None:
        response.headers["x-routelens-worker"] = str(worker)  # which of the workers answered

    app.on_cleanup.append(close_emitter)
    app.on_response_prepare.append(name_worker)
    return app
