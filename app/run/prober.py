"""The prober, wired: runner, scheduler, verdicts, alerts and metrics around one fleet.

:class:`Prober` is a :class:`router_core.gateway.probe_source.ProbeSource`. It runs where
``routelens serve`` puts it (in the gateway process with one worker; in the store process with
several, which the workers follow) or alone (``routelens probes run``). Every result goes through
the trace pipeline (``emit``: stored, ``GET /v1/probes``); a verdict that changes goes to
``apply`` (the state view, so the ``probe`` filter sees it), to ``/metrics`` and, as a router
event, to the store; the alert manager turns verdicts into notifications.

Probe requests go straight to the instances with their own client session and connection pool,
never through the router: they are in no trace and in no observation window of the router.
An instance's ``probes`` override (``fleet.instances[].probes``) takes it out (``false``) or gives
it fewer kinds or a longer interval (a paid provider, whose every probe is a billed request).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from app.run.gc_tuning import tame_gc
from probes.alerts import AlertManager
from probes.baselines import BaselineStore
from probes.capacity import AUTO_CEILING, AUTO_START
from probes.embedder import Embedder, MiniLMEmbedder, available
from probes.metrics import ProbeMetrics
from probes.runner import ProbeRunner
from probes.scheduler import ProbeScheduler
from probes.types import Target
from probes.verdicts import VerdictBoard
from router_core import cancel_all, probe_feed_body, upstream_keys
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config import RouteLensConfig
from schemas.probe import ProbeResult, ProbeStatus
from schemas.records import RouterEvent

__all__ = ["Prober", "baselines_path", "overrides_of", "targets_of"]

log = logging.getLogger(__name__)


def targets_of(config: RouteLensConfig, environ: Mapping[str, str] | None = None) -> list[Target]:
    """The probed instances as probe targets, with each one's upstream key (``api_key_env``) and model name.

    An instance with ``probes: false`` is left out.
    """
    probed = [i for i in config.fleet.instances if i.probes is None or i.probes.enabled]
    keys = upstream_keys(probed, os.environ if environ is None else environ)
    return [Target(i.id, i.model, i.url, keys.get(i.id), i.upstream_model) for i in probed]


def overrides_of(config: RouteLensConfig, kinds: list[ProbeKind]) -> tuple[dict[str, list[ProbeKind]], dict[str, int]]:
    """Per-instance kinds (of ``kinds``, the ones run) and periods between probes, from ``fleet.instances[].probes``.

    An override never asks for more than the ``probes`` section: the configuration refuses it at load.
    """
    settings = config.probes
    kinds_of: dict[str, list[ProbeKind]] = {}
    every: dict[str, int] = {}
    for spec in config.fleet.instances:
        o = spec.probes
        if o is None or not o.enabled:
            continue
        if o.kinds is not None:
            kinds_of[spec.id] = [k for k in kinds if k in o.kinds]
        if o.interval_s is not None:  # whole periods: the 1e-9 keeps 60 s over 30 s at 2, not 3
            every[spec.id] = max(1, math.ceil(o.interval_s / settings.interval_s - 1e-9))
    return kinds_of, every


def baselines_path(config: RouteLensConfig, db_path: str) -> Path:
    """Where learned latency baselines persist (``probes.latency.state_path``, else beside the data)."""
    given = config.probes.latency.state_path
    return Path(given) if given else Path(f"{db_path}.probe-baselines.json")


class Prober:
    """Probes the fleet of ``config`` every ``probes.interval_s`` and publishes verdicts and alerts.

    Args:
        config: The configuration (``probes`` and ``fleet``).
        db_path: The trace file; latency baselines persist beside it unless configured.
        emit: Takes every ProbeResult and RouterEvent (the trace pipeline's ``emit``).
        apply: Takes each changed verdict with its instance (``StateView.set_probe``); None: publish only.
        runs: Takes ``(instance, kind, results, ok_run)`` after every result (the breakers' probe
            recovery, ``Gateway.probe_run``); None: publish only (the feed's ``runs``).
        registry: Where the probe metrics go (the process's ``/metrics``).
        wall, clock, rng: Injected time and randomness (jitter).
        embedder: The semantic probe's embedder; None: MiniLM when installed, else no semantic probe.
    """

    def __init__(self, config: RouteLensConfig, *, db_path: str, emit: Callable[[BaseModel], object],
                 apply: Callable[[ProbeStatus, str], object] | None, registry: CollectorRegistry,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC), clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None, embedder: Embedder | None = None, source: str = "prober",
                 runs: Callable[[str, str, int, int], object] | None = None) -> None:
        self.settings = config.probes
        self._config = config
        self._emit, self._apply, self._runs = emit, apply, runs
        self._wall, self._clock = wall, clock
        self._rng = rng or random.Random()
        self.metrics = ProbeMetrics(registry)
        self.board = VerdictBoard(self.settings.hysteresis)
        self._baselines = BaselineStore(baselines_path(config, db_path))
        self._source = source
        self.targets = targets_of(config)
        self._models = {t.instance: t.model for t in self.targets}
        kinds = list(self.settings.kinds)
        missing = available() if embedder is None else None
        if ProbeKind.SEMANTIC in kinds and missing is not None:
            log.warning("semantic probe off: the embedding model is %s", missing)
            kinds.remove(ProbeKind.SEMANTIC)
        self.kinds = kinds
        self._kinds_of, self._every = overrides_of(config, kinds)
        self._embedder = embedder if embedder is not None or missing is not None else MiniLMEmbedder()
        self.alert_manager = AlertManager(self.settings.alerts, on_event=self._event, wall=wall, clock=clock,
                                          last_result_at=lambda: self._last_result_at())
        self.scheduler: ProbeScheduler | None = None
        self.runner: ProbeRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._started_at: float | None = None

    def _last_result_at(self) -> float | None:
        # Before the first result the prober counts as having reported at its start: the watchdog fires
        # on silence after that, not at once.
        if self.scheduler is not None and (at := self.scheduler.last_result_at()) is not None:
            return at
        return self._started_at

    async def start(self) -> None:
        """Start probing in the background (returns at once)."""
        # Keep-alive: a fresh connection per probe would churn ephemeral ports (600 per period at 200 instances).
        # No cap on connections: the scheduler bounds the probes in flight, and a semantic round sends all its
        # references at once; a pool capped at max_concurrent made probes queue for a connection inside their
        # own timing (a latency probe measured the wait: false 'degraded' verdicts on a big fleet).
        connector = aiohttp.TCPConnector(limit=0)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
        self.runner = runner = ProbeRunner(self.settings, self._session, embedder=self._embedder,
                                           baselines=self._baselines, wall=self._wall)
        given = self.settings.max_concurrent  # "auto": start at AUTO_START, grow with the fleet's need
        limit, grow_to = (given, None) if isinstance(given, int) else (AUTO_START, AUTO_CEILING)
        self.scheduler = ProbeScheduler(
            self.targets, self.kinds, runner.run, self._on_result, interval_s=self.settings.interval_s,
            jitter=self.settings.jitter, timeout_s=self.settings.timeout_s, max_concurrent=limit,
            timed_out=self._timed_out, clock=self._clock, rng=self._rng, on_slip=self.metrics.observe_slip,
            on_skip=self.metrics.record_skipped, kinds_of=self._kinds_of, every=self._every,
            grow_to=grow_to, on_capacity=self.metrics.set_capacity,
        )
        self._started_at = self._clock()
        self._tasks = [asyncio.create_task(self._probe_forever(self.scheduler)),
                       asyncio.create_task(self.alert_manager.run_forever())]

    async def _probe_forever(self, scheduler: ProbeScheduler) -> None:
        # Load the embedding model before the first slot (in a thread; start() has returned, so a
        # gateway is already serving): a first semantic probe would otherwise stall the schedule.
        if self._embedder is not None and ProbeKind.SEMANTIC in self.kinds:
            await _in_daemon_thread(self._embedder.embed, ["warm-up"])
            # The model brought hundreds of thousands of objects: out of every later collection with
            # the rest of the start-up (see app.run.gc_tuning), or each full one walks them on a request.
            tame_gc()
        await scheduler.run_forever()

    async def stop(self) -> None:
        """Stop probing, deliver what the alert manager still holds (bounded), close the session."""
        if self.scheduler is not None:
            self.scheduler.stop()
        await cancel_all(self._tasks)
        try:  # a resolve or firing queued just now still goes out, within a bound: stopping must stay prompt
            await asyncio.wait_for(self.alert_manager.drain(), 0.5)
        except TimeoutError:
            log.warning("alert notifications still undelivered at stop were dropped")
        await self.alert_manager.close()
        if self._session is not None:
            await self._session.close()

    def _timed_out(self, kind: ProbeKind, target: Target, elapsed_ms: float) -> ProbeResult:
        """A probe with no answer in time: its latency, and no value (a similarity of 10,000 ms means nothing)."""
        return ProbeResult(probe_id="probe_" + uuid.uuid4().hex[:20], ts=self._wall(), instance=target.instance,
                           model=target.model, kind=kind, verdict=ProbeVerdict.FAILED, latency_ms=elapsed_ms,
                           reason=f"no answer within {self.settings.timeout_s:g} s", error_class="timeout")

    def _on_result(self, result: ProbeResult) -> None:
        self._emit(result)
        self.metrics.record(result)
        status = self.board.observe(result)
        self.alert_manager.observe(result, status)
        if self._runs is not None:
            self._runs(result.instance, result.kind.value, *self.board.run(result.instance, result.kind))
        current = status or self.board.status(result.instance, result.kind)
        if self._apply is not None and current is not None:  # a newer reading too: the router's state shows it
            self._apply(current, result.instance)
        if status is None:
            return
        self.metrics.set_status(result.instance, result.model, status)
        self._event(RouterEvent(
            event_id="evt_" + uuid.uuid4().hex[:20], ts=status.since, kind="probe_verdict",
            severity="info" if status.verdict is ProbeVerdict.OK else "warning", instance=result.instance,
            model=result.model, value=status.value, router_version=self._config.router.version,
            message=f"{status.kind.value} probe verdict {status.verdict.value}"
                    + (f": {status.reason}" if status.reason else "")))

    def _event(self, event: RouterEvent) -> None:
        self._emit(event)

    def verdicts(self) -> dict[str, list[ProbeStatus]]:
        """The hysteresis verdicts of every probed instance."""
        return self.board.snapshot()

    def feed(self) -> dict[str, Any]:
        """The ``GET /v1/probes/verdicts`` body."""
        at = self._last_result_at()
        age = None if at is None else max(self._clock() - at, 0.0)
        return probe_feed_body(self.verdicts(), self.alerts(), age, self._source, self.board.runs())

    def alerts(self) -> list[dict[str, Any]]:
        """The active alerts."""
        return self.alert_manager.active()

    def stats(self, reset: bool = False) -> dict[str, Any]:
        """Schedule health: results so far, skipped slots, slip (start minus slot) and semantic scoring quantiles.

        ``reset`` empties the slip and scoring samples afterwards (a benchmark's warm-up).
        """
        sched, sem = self.scheduler, None if self.runner is None else self.runner.semantic
        slips = sorted(s * 1e3 for s in sched.slips) if sched is not None else []
        scoring = sorted(sem.scoring_ms) if sem is not None else []

        def q(values: list[float], p: float) -> float | None:
            return round(values[min(int(p * len(values)), len(values) - 1)], 3) if values else None

        out = self._stats(sched, sem, q(slips, 0.5), q(slips, 0.99), len(slips))
        out |= {"semantic_scoring_p50_ms": q(scoring, 0.5), "semantic_scoring_p99_ms": q(scoring, 0.99)}
        if reset and sched is not None:
            sched.slips.clear()
        if reset and sem is not None:
            sem.scoring_ms.clear()
        return out

    def _stats(self, sched: ProbeScheduler | None, sem: Any, slip_p50: float | None, slip_p99: float | None,
               slips: int) -> dict[str, Any]:
        return {"started": 0 if sched is None else sched.started,
                "in_flight": 0 if sched is None else sched.in_flight(),
                "skipped": {} if sched is None else {k.value: n for k, n in sched.skipped.items()},
                "slip_p50_ms": slip_p50, "slip_p99_ms": slip_p99, "slips": slips,
                "kinds": [k.value for k in self.kinds], "targets": len(self.targets),
                "answer_cache": None if sem is None else {"hits": sem.cache_hits, "misses": sem.cache_misses}}

    def problem(self) -> str | None:
        """Why verdicts may be out of date: the prober has not produced a result for three periods.

        The period is the shortest of any probed instance's; with none to probe, nothing is out of date.
        """
        periods = [self._every.get(t.instance, 1) for t in self.targets if self._kinds_of.get(t.instance, self.kinds)]
        if not periods:
            return None
        at = self._last_result_at()
        silent = None if at is None else self._clock() - at
        if silent is not None and silent > 3 * min(periods) * self.settings.interval_s + self.settings.timeout_s:
            return f"no probe result for {silent:.0f} s"
        return None


async def _in_daemon_thread(fn: Callable[[list[str]], object], arg: list[str]) -> None:
    """Run ``fn(arg)`` in a daemon thread and wait for it; errors are logged (the probes report them).

    Not the loop's default executor: its threads are joined when the interpreter exits, so a
    model still loading (seconds) would keep a prober told to stop from going.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def work() -> None:
        try:
            fn(arg)
        except Exception as exc:  # the semantic probes will report it as their reason
            log.warning("embedding model did not load: %s", exc)
        loop.call_soon_threadsafe(_finish, done)

    threading.Thread(target=work, name="embedding-model-load", daemon=True).start()
    await done


def _finish(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)
