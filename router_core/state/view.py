"""The router's view of live instance state: scraped gauges, its own observations, and latches.

Scrapes (``update``) and forwarded requests (``observe``) feed it; ``tick`` (after every scrape
round) rebuilds one immutable :class:`InstanceSnapshot` per instance, including every constraint's
hysteresis latch. Requests then read those snapshots without copying them.

No snapshot leaves this view with a gauge outside the range ``InstanceSnapshot`` declares: the
parser already refuses or clamps such values (``router_core.state.parse``), and ``update``
drops any that still get through (an ``EngineGauges`` built by hand), so a stored trace always
validates when read back. What the parser adjusted is kept in ``scrape_error`` as
``"out_of_range: queue=-5 refused (negative)"``: the scrape was not taken whole, and the decision
records which gauges were refused or clamped.

Warm-up comes from the engine's gauge, else its process uptime over ``scrape.warmup_s``, else is
assumed (1.0), and ``warmup_source`` says which (:mod:`router_core.state.warmup`); the scrape
time is the injected ``wall`` clock's.

An ``engine: external`` instance (no ``/metrics``) is never scraped: its snapshot starts with
nothing queued or running, KV not reported, warm-up assumed, and ``scraped_at`` None for good;
the gateway's own in-flight count becomes its queue (:mod:`router_core.state.inflight`; every
worker's), which its queue and running constraints judge at each tick (``open_attempts``) and
``views`` shows, and its observation window gives its latency and error rate like any other's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from router_core.framework.types import Effective
from router_core.state.constraints import applies, holds, metric_value
from router_core.state.histogram import Buckets, delta_quantile
from router_core.state.hysteresis import HysteresisLatch
from router_core.state.parse import EngineGauges
from router_core.state.staleness import effective_state
from router_core.state.warmup import warmup_progress
from router_core.state.window import ObservationWindow
from schemas.common import ProbeKind
from schemas.config import ConstraintSpec, ScrapeSettings
from schemas.fleet import EXTERNAL, InstanceSnapshot, InstanceSpec, LatchState
from schemas.probe import ProbeStatus

__all__ = ["StateView", "initial_snapshot"]


def initial_snapshot(spec: InstanceSpec) -> InstanceSnapshot:
    """An instance's snapshot before any scrape: empty, or for an external one, what it always starts from."""
    if spec.engine == EXTERNAL:  # never scraped: idle until the gateway sends it something
        return InstanceSnapshot(instance=spec.id, model=spec.model, engine=spec.engine, queue=0.0, running=0.0,
                                warmup_progress=1.0, warmup_source="assumed")
    return InstanceSnapshot(instance=spec.id, model=spec.model, engine=spec.engine)


@dataclass
class _Instance:
    spec: InstanceSpec
    snap: InstanceSnapshot
    window: ObservationWindow
    latches: dict[str, HysteresisLatch] = field(default_factory=dict)
    ttft: Buckets | None = None
    e2e: Buckets | None = None


class StateView:
    """Latest known state of every instance of the fleet.

    Args:
        specs: The fleet.
        constraints: Hard constraints, evaluated with hysteresis on every tick.
        scrape: Staleness bounds and the observation window.
        queue_cap: Queue length treated as saturated.
        clock: Monotonic seconds (injected); wall: current UTC time (injected).
        open_attempts: The gateway's open attempts to an instance (every worker's), which are an external
            instance's queue: its latches judge them at each tick. None: none counted (no gateway).
    """

    def __init__(
        self,
        specs: Iterable[InstanceSpec],
        constraints: Sequence[ConstraintSpec] = (),
        *,
        scrape: ScrapeSettings | None = None,
        queue_cap: float = 10.0,
        clock: Callable[[], float],
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        open_attempts: Callable[[str], int] | None = None,
    ) -> None:
        self._scrape = scrape or ScrapeSettings()
        self._constraints = list(constraints)
        self._queue_cap = queue_cap
        self._clock = clock
        self._wall = wall
        self._open = open_attempts
        self._by_id = {
            s.id: _Instance(s, initial_snapshot(s), ObservationWindow(self._scrape.window_s)) for s in specs
        }
        for inst in self._by_id.values():
            for c in self._constraints:
                if applies(c, inst.spec):
                    inst.latches[c.name] = HysteresisLatch(c.exit_for, c.enter_for)
        self._latched_at: dict[tuple[str, str], datetime] = {}
        # A latch that never moved has been in since this view began: dated so (not None), a stored
        # stretch out ends where a restarted gateway's first snapshots show it in (ingest's latches.sql).
        self._began = wall()

    def knows(self, instance: str) -> bool:
        """Whether ``instance`` is one of this view's fleet."""
        return instance in self._by_id

    def scraped_at(self, instance: str) -> datetime | None:
        """When ``instance`` was last scraped whole (None: never)."""
        return self._by_id[instance].snap.scraped_at

    def update(self, instance: str, gauges: EngineGauges | None, error: str | None = None, *,
               at: datetime | None = None) -> bool:
        """Record one scrape: its gauges, or the error that made it fail (gauges then age); False: not taken.

        ``at``: when it was scraped (None: now, by the injected wall clock); another worker's
        round (:meth:`router_core.state.scraper.MetricsScraper.follow`) carries its own time. Gauges
        scraped before the ones held are not taken (a round that worker finished late, after this
        worker scraped for itself): ``scraped_at`` never goes back, nor the histograms' counts.
        """
        inst = self._by_id[instance]
        if gauges is None:
            inst.snap = inst.snap.model_copy(update={"scrape_error": error})
            return True
        if at is not None and inst.snap.scraped_at is not None and at < inst.snap.scraped_at:
            return False
        ttft = None if gauges.ttft_buckets is None else delta_quantile(inst.ttft, gauges.ttft_buckets, 0.95)
        e2e = None if gauges.e2e_buckets is None else delta_quantile(inst.e2e, gauges.e2e_buckets, 0.95)
        inst.ttft, inst.e2e = gauges.ttft_buckets, gauges.e2e_buckets
        adjusted = "out_of_range: " + "; ".join(gauges.adjustments) if gauges.adjustments else None
        at = self._wall() if at is None else at
        warmup, source = warmup_progress(gauges.warmup_progress, gauges.process_start_s, at.timestamp(),
                                         self._scrape.warmup_s)
        inst.snap = inst.snap.model_copy(update={
            "scraped_at": at, "engine": gauges.engine, "queue": _in_range(gauges.queue),
            "running": _in_range(gauges.running), "kv_cache_usage": _in_range(gauges.kv_cache_usage, 1.0),
            "warmup_progress": warmup, "warmup_source": source, "scrape_error": adjusted and adjusted[:200],
            "ttft_p95_ms": _in_range(None if ttft is None else ttft * 1e3),
            "e2e_p95_ms": _in_range(None if e2e is None else e2e * 1e3),
        })
        return True

    def set_probe(self, status: ProbeStatus, instance: str) -> bool:
        """Carry a probe verdict (one kind) in ``instance``'s snapshot from now on; False if unknown.

        The snapshot is replaced (never changed in place), so decisions memoised on the old one
        are not reused; later scrapes and ticks keep the verdict until the next one of its kind.
        """
        inst = self._by_id.get(instance)
        if inst is None:
            return False
        kept = [p for p in inst.snap.probes if p.kind != status.kind]
        inst.snap = inst.snap.model_copy(update={"probes": sorted([*kept, status], key=lambda p: p.kind)})
        return True

    def probe_of(self, instance: str, kind: ProbeKind) -> ProbeStatus | None:
        """The probe verdict of one kind ``instance``'s snapshot carries (None: none yet, or no such instance)."""
        inst = self._by_id.get(instance)
        return None if inst is None else next((p for p in inst.snap.probes if p.kind == kind), None)

    def p95_ms(self, instance: str) -> float | None:
        """The router's observed p95 latency of ``instance`` as of the last tick (None: nothing observed)."""
        found = self._by_id.get(instance)
        return None if found is None else found.snap.p95_latency_ms

    def observe(self, instance: str, latency_ms: float, ok: bool) -> None:
        """Record the result of a request the router sent to ``instance``.

        ``ok``: answered (its latency counts in the window's p50/p95); a failure counts in the error rate only.
        """
        self._by_id[instance].window.add(self._clock(), latency_ms, ok)

    def tick(self) -> None:
        """Fold the observation windows in, evaluate every latch, rebuild the snapshots."""
        now, wall = self._clock(), self._wall()
        for inst in self._by_id.values():
            stats = inst.window.stats(now)
            snap = inst.snap.model_copy(update={
                "error_rate": stats.error_rate, "p50_latency_ms": stats.p50_ms,
                "p95_latency_ms": stats.p95_ms, "window_requests": stats.requests,
            })
            eff = self._queued(inst.spec, snap, effective_state(snap, wall, self._scrape, self._queue_cap))
            latches = []
            for c in self._constraints:
                latch = inst.latches.get(c.name)
                if latch is None:
                    continue
                value = metric_value(c, snap, eff)
                if latch.update(now, broken=not holds(c, value, c.threshold), recovered=holds(c, value, c.enter_bound)):
                    self._latched_at[(inst.spec.id, c.name)] = wall
                latches.append(LatchState(constraint=c.name, out=latch.out, value=value,
                                          since=self._latched_at.get((inst.spec.id, c.name), self._began)))
            inst.snap = snap.model_copy(update={"latches": latches, "age_s": eff.age_s, "stale": eff.suspect})

    def _queued(self, spec: InstanceSpec, snap: InstanceSnapshot, eff: Effective) -> Effective:
        """An external instance's gauges with the gateway's open attempts to it queued (the others' as scraped)."""
        if spec.engine != EXTERNAL or self._open is None:
            return eff
        n = self._open(spec.id)
        return eff if n == 0 else replace(eff, queue=eff.queue + n)

    def _shown(self, spec: InstanceSpec, snap: InstanceSnapshot, now: datetime) -> dict[str, Any]:
        """What ``views`` shows beside the snapshot: its age now, and an external instance's open attempts."""
        eff = effective_state(snap, now, self._scrape, self._queue_cap)
        shown: dict[str, Any] = {"age_s": eff.age_s, "stale": eff.suspect}
        if spec.engine == EXTERNAL and self._open is not None and snap.queue is not None:
            shown["queue"] = snap.queue + self._open(spec.id)
        return shown

    def snapshot(self) -> dict[str, InstanceSnapshot]:
        """Return the current snapshot of every instance (shared, immutable objects)."""
        return {iid: inst.snap for iid, inst in self._by_id.items()}

    def views(self) -> dict[str, Any]:
        """Instance, model and cluster views for ``GET /v1/router/state``.

        ``age_s`` and ``stale`` are computed at the time of the call, not taken from the last
        tick: if scraping stalls, the data still shows as stale as it ages.
        """
        wall = self._wall()
        snaps = [i.snap.model_copy(update=self._shown(i.spec, i.snap, wall)) for i in self._by_id.values()]
        by_model: dict[str, list[InstanceSnapshot]] = {}
        for s in snaps:
            by_model.setdefault(s.model, []).append(s)

        def summary(group: list[InstanceSnapshot]) -> dict[str, Any]:
            feasible = [s for s in group if not any(latch.out for latch in s.latches) and not s.stale
                        and not any(p.verdict == "failed" and p.kind != "latency" for p in s.probes)]
            kv = [s.kv_cache_usage for s in group if s.kv_cache_usage is not None]
            return {"instances": len(group), "in_feasible_set": len(feasible),
                    "queue": sum(s.queue or 0 for s in group), "running": sum(s.running or 0 for s in group),
                    "kv_cache_usage_mean": sum(kv) / len(kv) if kv else None}

        return {"instances": [s.model_dump(mode="json") for s in snaps],
                "models": {m: summary(g) for m, g in by_model.items()}, "cluster": summary(snaps)}


def _in_range(value: float | None, high: float = math.inf) -> float | None:
    """``value`` when it is a finite number in [0, high], else None (treated as missing)."""
    return value if value is not None and math.isfinite(value) and 0 <= value <= high else None
