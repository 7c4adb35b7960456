"""``routelens serve``: the gateway's processes (its workers, the store, the prober, a local Redis).

Each gateway process runs the application :func:`app.run.gateway_app.build_gateway_app` builds
(the gateway wired to the trace pipeline and its query API); this module starts the processes
around it, waits for each to be ready, and stops them in order.
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from app.run.access import access_notices
from app.run.event_loop import new_event_loop
from app.run.gateway_app import GATEWAY, STARTED_AT_ENV, build_gateway_app
from app.run.local_redis import start_local_redis, with_shared_url
from app.run.logs import DEFAULT_LOG, LogSettings, configure
from app.run.probe_child import start_prober, wants_prober
from app.run.procs import Child, app_command, free_port, free_ports, reserve_ports
from app.run.siblings import SIBLING_PORTS_ENV, sibling_ports
from app.run.storage import RELAY_TOKEN_ENV
from app.run.stranded import Delivery, deliver_stranded
from app.run.supervise import Supervised
from ingest import SERVER_LIMITS, RelaySink
from schemas.config import RouteLensConfig

__all__ = ["run_server"]


def run_server(
    config: RouteLensConfig, *, config_path: str | None = None, host: str | None = None, port: int | None = None,
    db: str | None = None, workers: int = 1, store_url: str | None = None, worker: int = 0,
    separate_store: bool | None = None, probe_url: str | None = None, shared_url: str | None = None,
    own_store: bool = False, metrics_ports: Sequence[int] = (), log: LogSettings = DEFAULT_LOG,
) -> None:
    """Serve until SIGINT, SIGTERM or SIGHUP; print ``gateway ready http://HOST:PORT`` once listening.

    The trace store runs in a process of its own (``routelens store``, started here from
    ``config_path`` unless ``store_url`` names a running one): always with ``workers`` > 1 (the
    CLI's default is ``gateway.workers``: one per core, at most 8), and with one worker unless
    ``separate_store`` is False (None: ``storage.separate_process``, true by default), which keeps
    it in this process. The
    ``workers`` gateway processes share the port (``SO_REUSEPORT``; this process is worker 0, the
    others its children), each with its own spool relaying to the store. With probes on, a prober
    process (``routelens probes run``, one per host) is started too; every gateway process follows
    its verdicts and it relays its results to the store (see :mod:`app.run.probe_child`).

    Workers share their state (throttles, rule buckets, budgets, breakers, bindings) through
    ``shared``; with ``shared.backend: memory`` and more than one worker, a Redis of their own is
    started on a Unix socket in the data folder (:mod:`app.run.local_redis`), or, where it cannot
    be, one worker runs and says why. ``shared_url``: that Redis, for the workers serve starts.
    ``own_store``: ``store_url`` is the store the serve that started this worker started (its
    series are republished on ``/metrics``, as the first worker's are). ``metrics_ports``: each
    worker's private metrics port, chosen by the serve that started this worker. ``log``: how much
    this process logs and in what form (:mod:`app.run.logs`); the processes it starts inherit it.
    """
    # at warning, the intents fit's lines (started: routes, examples, cache; live: seconds), at start and each refit
    configure(log, "serve" if worker == 0 else f"gateway-{worker}",
              info_at_warning=("router_core.gateway.live_intents",))
    host = host or config.gateway.host
    port = config.gateway.port if port is None else port
    reserve_ports(port)  # the ports picked below for the store, the prober and the workers are never this one
    for notice in access_notices(config, host):  # raises before binding when either would be open off loopback
        print(f"notice: {notice}", file=sys.stderr, flush=True)
    db = db or config.storage.duckdb_path
    if shared_url is not None:
        config = with_shared_url(config, shared_url)
    children: list[Child | Supervised] = []
    deliveries: list[Delivery] = []
    first: list[Child | Supervised] = []  # stopped while the gateway listens: the prober relays its last results here
    peers: list[Supervised] = []  # the other workers: with a prober, stopped before it (each follows it until it ends)
    if config_path is not None and worker == 0:  # the relay between this serve's processes takes a token of its own
        os.environ.setdefault(RELAY_TOKEN_ENV, secrets.token_hex(16))
        os.environ.update(log.env())  # the workers, the store and the prober log as this process does
    try:
        if workers > 1 and worker == 0 and config.shared.backend == "memory":
            redis, found = start_local_redis(Path(db).parent)
            if redis is None:
                print(f"notice: running 1 worker, not {workers}: workers share their limits and learned state "
                      f"through Redis, and {found}; set shared.backend: redis and shared.url to run more",
                      file=sys.stderr, flush=True)
                workers = 1
            else:
                children.append(redis)  # stopped last: after the workers and the store
                shared_url, config = found, with_shared_url(config, found)
                print(f"shared state: a local redis-server on {found} for {workers} workers", flush=True)
        if separate_store is None:
            separate_store = config.storage.separate_process
        store: Supervised | None = None
        if config_path is not None and store_url is None and (workers > 1 or separate_store):
            store_port = free_port()  # started now, waited for once this process's gateway is built
            argv = ["store", "--port", str(store_port), "--db", db]
            store = Supervised("store", functools.partial(_child, "store", config_path, argv, "store ready",
                                                          wait=False))  # started again if it dies
            children.append(store)
            store_url, own_store = f"http://127.0.0.1:{store_port}", True
        if probe_url is None and config_path is not None and worker == 0 and wants_prober(config):
            child, probe_url = start_prober(config_path, db, store_url or f"http://127.0.0.1:{port}")
            first.append(child)
        starts_workers = config_path is not None and worker == 0
        if starts_workers and workers > 1:  # each worker's own series, for the one that answers a scrape
            ports = free_ports(2 * workers)  # and its pending traces, for a lookup another worker missed
            metrics_ports = ports[:workers]
            os.environ[SIBLING_PORTS_ENV] = ",".join(map(str, ports[workers:]))  # the workers it starts inherit it
            os.environ[STARTED_AT_ENV] = str(int(time.time()))  # /v1/models' created, the same from every worker
        for i in range(1, workers if starts_workers else 1):
            peer = Supervised(f"gateway-{i}", functools.partial(_child, f"gateway-{i}", config_path or "", [
                "serve", "--host", host, "--port", str(port), "--db", db, "--store-url", store_url or "",
                "--worker", str(i), "--workers", str(workers), *(["--probe-url", probe_url] if probe_url else []),
                "--metrics-ports", ",".join(map(str, metrics_ports)),
                *(["--shared-url", shared_url] if shared_url else []), *(["--own-store"] if own_store else [])],
                "gateway ready", wait=False))  # started again if it dies: it replays its own spool
            children.append(peer)
            peers.append(peer)
            _ready(peer)
        app = build_gateway_app(config, db, store_url=store_url, worker=worker, probe_url=probe_url,
                                config_path=config_path, own_store=own_store, metrics_ports=metrics_ports,
                                sibling_ports=sibling_ports(workers), workers=workers)
        if store is not None:
            _ready(store)
        if starts_workers:  # spools of workers this serve does not run (it ran more before): to the store
            token = os.environ.get(RELAY_TOKEN_ENV) or None
            relay = None if store_url is None else functools.partial(RelaySink, store_url, token=token)
            # the store in this process: worker 0 spools beside it, so every worker's spool is another's
            deliveries = deliver_stranded(config.storage, db, workers if relay else 0, relay,
                                          lambda msg: print(msg, file=sys.stderr, flush=True))
        app.on_startup.append(functools.partial(_stop_in_order, first, peers))
        web.run_app(
            app,
            host=host,
            port=port,
            reuse_port=workers > 1,
            shutdown_timeout=1.0,  # in-flight requests get 1 s (aiohttp's default waits 60 s)
            access_log=None,
            **SERVER_LIMITS,  # a 10 kB id in a URL or header reaches the routes (OpenAI-shaped 400)
            print=lambda _msg: print(f"gateway ready http://{host}:{port}" + (f" (worker {worker})" if worker else ""),
                                     flush=True),
            loop=new_event_loop(),
        )
    finally:
        for delivery in deliveries:  # what the store has not taken stays in the spool, for the next start
            delivery.stop()
        _stop_all([*first, *reversed(children)])  # the store, then the local Redis (children[0]), last


def _child(name: str, config_path: str, argv: list[str], ready: str, *, wait: bool = True) -> Child:
    """Start ``routelens --config CONFIG ARGV...`` as a child that ends with us; wait for its ready line.

    Not ``wait``: the caller waits with :func:`_ready`.
    """
    py, env = app_command(dict(os.environ))
    child = Child(name, [*py, "--config", config_path, *argv], env, ready_marker=ready, echo=True)
    if wait:
        _ready(child)
    return child


def _ready(child: Child | Supervised) -> None:
    """Wait up to 60 s for ``child``'s ready line; stop it and exit with an error when it does not come."""
    if not child.wait_ready(60):
        child.stop()
        raise SystemExit(f"error: the {child.name} process did not start (see its output above)")


async def _stop_in_order(first: list[Child | Supervised], peers: list[Supervised], app: web.Application) -> None:
    """Ctrl-C, SIGTERM and SIGHUP stop ``first`` (the prober) before the gateway stops listening.

    aiohttp's own handlers stop the sites at once; the prober, still running, would then fail to
    relay its last results and say so. So the prober ends first, off the loop (which keeps serving
    its relay), and only then does the gateway shut down as aiohttp does it; the ``finally`` of
    :func:`run_server` stops what is left and, last, the store. Every gateway process stops following
    the prober's verdicts before it goes (a poll of a prober on its way out would fail and warn):
    this one first, then the other workers ``peers``, which end (all at once) before the prober
    does; without a prober they end after this one, as before. A second signal does not wait.
    SIGHUP (a closed terminal) ends the server the clean way SIGTERM does.
    """
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    def stop_then_exit() -> None:
        if stopping:
            _graceful_exit()
            return

        async def run() -> None:
            if first:
                if (probes := app[GATEWAY].probes) is not None:
                    await probes.stop()  # again in the gateway's own cleanup: stopping twice is a no-op
                await loop.run_in_executor(None, _stop_together, peers)  # they relay to the store process
            await loop.run_in_executor(None, _stop_all, first)
            loop.call_soon(_graceful_exit)

        stopping.append(loop.create_task(run()))

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop_then_exit)


def _stop_all(children: list[Child | Supervised]) -> None:
    for child in children:
        child.stop()


def _stop_together(children: Sequence[Child | Supervised]) -> None:
    """Stop ``children`` at once (each on a thread of its own): the slowest one's time, not their sum."""
    threads = [threading.Thread(target=child.stop, name=f"stop-{child.name}") for child in children]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _graceful_exit() -> None:
    """End ``web.run_app`` the way its own signal handlers do (a ``GracefulExit`` out of the loop)."""
    raise web.GracefulExit()
