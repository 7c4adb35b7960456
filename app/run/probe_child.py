"""Where ``routelens serve`` runs its prober: a process of its own, one per host, that gateways follow.

The semantic probe needs torch and an embedding model (hundreds of MB, seconds of start-up with
the interpreter's lock held while it imports); measured in this process, the model's load moved
the gateway's c=1 p99 from 20 ms to 150 ms for as long as it took, and in steady state nothing.
So the gateway process never loads it: ``serve`` starts ``routelens probes run`` as a child that
ends with it, every gateway process follows that prober's ``GET /v1/probes/verdicts``, and the
prober relays its results and events to the trace store (the store process, or the one gateway's
in-process store through ``POST /v1/internal/records``, with a token made for this run).

Without a configuration file (``serve`` on the embedded default) there is nothing to hand a
child, so the prober runs in the gateway process instead.
"""

from __future__ import annotations

import functools
import os
import secrets
import signal
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from app.run.procs import Child, app_command, free_port
from app.run.storage import RELAY_TOKEN_ENV
from app.run.supervise import Supervised
from ingest import TraceEmitter
from router_core import Gateway, ProbeSource, VerdictFollower
from schemas.config import RouteLensConfig

__all__ = ["probe_source", "start_prober", "wants_prober"]


def wants_prober(config: RouteLensConfig) -> bool:
    """Whether this host should run a prober (probes on, and not following one elsewhere)."""
    return config.probes.enabled and config.probes.follow_url is None


def start_prober(config_path: str, db: str, store_url: str) -> tuple[Supervised, str]:
    """Start ``routelens probes run`` relaying to ``store_url``; return it and its URL once it is ready.

    The relay token is made here and handed to the prober and (through the environment this
    process's own store reads) to the gateway's relay route; it lives as long as this ``serve``.
    A prober that dies later is started again on the same port (the gateways follow that URL).
    """
    token = os.environ.setdefault(RELAY_TOKEN_ENV, secrets.token_hex(16))
    port = free_port()
    py, env = app_command({**os.environ, RELAY_TOKEN_ENV: token})
    argv = [*py, "--config", config_path, "probes", "run", "--port", str(port), "--store-url", store_url, "--db", db]
    # Its results are relayed as they come and its baselines saved as they change: nothing to lose to SIGKILL.
    start = functools.partial(Child, "prober", argv, env,
                              ready_marker="prober ready", echo=True, death_signal=signal.SIGKILL)
    child = start()
    if not child.wait_ready(60):
        child.stop()
        raise SystemExit("error: the prober process did not start (see its output above)")
    return Supervised("prober", start, child=child), f"http://127.0.0.1:{port}"


def probe_source(config: RouteLensConfig, db_path: str, emitter: TraceEmitter, registry: CollectorRegistry,
                 probe_url: str | None) -> Callable[[Gateway], ProbeSource] | None:
    """Where the gateway's probe verdicts come from; None when probes are off.

    A follower of ``probes.follow_url`` or of the prober ``serve`` started (``probe_url``); else,
    with probes on and no prober process, a prober in this process. Either prober's series appear
    on the gateway's ``/metrics`` (each gateway process republishes them, so whichever worker
    answers a scrape shows them once): the shipped Prometheus job scrapes the gateway alone.
    """
    pr = config.probes
    follow = pr.follow_url or probe_url
    if follow is not None:
        token = os.environ.get(config.storage.read_token_env) if config.storage.read_token_env else None

        def follower(gw: Gateway) -> VerdictFollower:
            found = VerdictFollower(follow, gw.apply_probe, token=token or None, alert_rules=config.probes.alerts.rules,
                                    runs=gw.probe_run)
            gw.metrics_sources.append(found.metrics_text)
            return found

        return follower
    if not pr.enabled:
        return None
    from app.run.prober import Prober  # the probes room (and its embedding model) only when probing here

    return lambda gw: Prober(config, db_path=db_path, emit=emitter.emit, apply=gw.apply_probe, registry=registry,
                             source="gateway", runs=gw.probe_run)
