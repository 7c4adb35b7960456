"""Pessimistic staleness: gauges older than a bound decay toward "saturated"; none at all are saturated.

Pure functions of (snapshot, now), used both when latches are evaluated and when scores are
computed, so a stored decision replays the same way. A gauge outside its physical range (which
the live view never produces, but a snapshot stored before the parser refused such values may
hold) counts as missing, hence saturated: a negative backlog must never look attractive.

An ``engine: external`` instance (a server without ``/metrics``, e.g. a hosted API) is never
scraped, by design: its state neither ages nor counts as saturated. Its KV share is "not
reported" (as TGI's) and its queue and running are the snapshot's, which hold what the gateway
itself has in flight there (:class:`router_core.state.inflight.InflightCounter` adds its open
attempts to ``queue``); a missing one counts as none. It is never suspect, and ``age_s`` stays
None: there is no scrape to be old.
"""

from __future__ import annotations

import math
from datetime import datetime

from router_core.framework.types import Effective
from schemas.config import ScrapeSettings
from schemas.fleet import EXTERNAL, InstanceSnapshot

__all__ = ["DECAYING_GAUGES", "ENGINES_WITHOUT_KV", "effective_state", "elapsed_s"]

# Engines whose /metrics may have no KV-cache share (Text Generation Inference never has one;
# llama.cpp's server dropped llamacpp:kv_cache_usage_ratio): for them a missing KV gauge is "not
# reported", judged by queue and running alone, not "unknown, so full" (which would hold every such
# instance out of the default kv-cache constraint forever).
ENGINES_WITHOUT_KV = frozenset({"tgi", "llamacpp"})

# The gauges :func:`effective_state` moves toward saturated once a snapshot is suspect (the windows
# observed from requests, error rate and latencies, are taken as they are).
DECAYING_GAUGES = frozenset({"kv_cache_usage", "queue", "running"})


def effective_state(snap: InstanceSnapshot, now: datetime, scrape: ScrapeSettings, queue_cap: float) -> Effective:
    """Return the gauges of ``snap`` as of ``now``.

    Up to ``scrape.suspect_after_s`` the scraped values stand. After that the instance is
    *suspect* and its values move linearly toward saturated (KV 1.0, queue and running at
    ``queue_cap``), reaching it at ``scrape.stale_after_s``. Missing gauges count as saturated.
    An external instance (never scraped, by design) is taken as its snapshot says, never suspect.
    """
    if snap.scraped_at is None:
        if snap.engine == EXTERNAL:  # only on the never-scraped branch: no cost for scraped instances
            return _external(snap, queue_cap)
        return Effective(None, True, 1.0, queue_cap, queue_cap)
    age = elapsed_s(now, snap.scraped_at)
    kv, queue, running = _sane(snap.kv_cache_usage, 1.0), _sane(snap.queue), _sane(snap.running)
    if kv is None and snap.kv_cache_usage is None and snap.engine in ENGINES_WITHOUT_KV:
        kv = 0.0  # decays toward full like any gauge once the state ages
    if age <= scrape.suspect_after_s:  # the common case: fresh data stands as it is
        return Effective(max(age, 0.0), False, 1.0 if kv is None else kv, queue_cap if queue is None else queue,
                         queue_cap if running is None else running)
    span = max(scrape.stale_after_s - scrape.suspect_after_s, 1e-9)
    f = min(max((age - scrape.suspect_after_s) / span, 0.0), 1.0)

    def toward(value: float | None, saturated: float) -> float:
        return saturated if value is None else value + (saturated - value) * f if value < saturated else value

    return Effective(
        age_s=age,
        suspect=age > scrape.suspect_after_s,
        kv_cache_usage=toward(kv, 1.0),
        queue=toward(queue, queue_cap),
        running=toward(running, queue_cap),
    )


def elapsed_s(now: datetime, then: datetime) -> float:
    """Seconds from ``then`` to ``now``, elapsed: two times in one zone with DST subtract as instants.

    Python subtracts two datetimes sharing one zone object as wall clocks, which a DST change between
    them puts an hour off (a trace's ``ts`` and its states read back in a local zone); times in
    different zones, or in UTC, already subtract as instants.
    """
    tz = now.tzinfo
    if tz is not None and then.tzinfo is tz and tz.utcoffset(None) is None:
        return now.timestamp() - then.timestamp()
    return (now - then).total_seconds()


def _external(snap: InstanceSnapshot, queue_cap: float) -> Effective:
    """No scrape to age: KV not reported, queue and running as counted (none counted: 0; nonsense: saturated)."""
    queue = 0.0 if snap.queue is None else _sane(snap.queue)
    running = 0.0 if snap.running is None else _sane(snap.running)
    return Effective(None, False, 0.0, queue_cap if queue is None else queue, queue_cap if running is None else running)


def _sane(value: float | None, high: float = math.inf) -> float | None:
    return value if value is not None and 0 <= value <= high else None  # NaN fails both comparisons
