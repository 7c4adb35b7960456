"""Tiered cost budgets per time band (seed 002 §5.1, problem 3).

A band (local hours, first match wins) governs some models with a budget per window: a share of
all calls (``max_share``, of at least ``min_calls``) or a spend (``max_spend``, in ``cost.base``
units). Its *use* is spend / budget. From ``ramp_from`` of the budget the cost weight rises
linearly to ``max_factor`` at it; at the budget the governed models are stopped (infeasible).

Windows follow the local clock of ``economics.budgets.timezone`` (:func:`window_at`): a window
of a day is the local date (from local midnight to the next: 23 or 25 hours on a DST day), and a
shorter one (which divides a day) starts at local midnight plus a multiple of its length, in local
wall time. Counters live in :class:`SharedState` so replicas add up:
``budget:<band>:<window id>:calls``, ``:governed`` and ``:spend``, the window id (the local date and
the window's index in it) a function of the time and the configuration only, so every worker
counts into the same keys. :meth:`BudgetTracker.view` reads only the local copy (a pure,
cheap call for the request path); :meth:`BudgetTracker.refresh` re-reads the shared totals and
:meth:`BudgetTracker.record` adds to them in the background.

While the shared state is unhealthy (Redis down: each worker sees only its own adds on top of the
last total it read), a band's figures are an *estimate*: this worker's own adds since the last
good refresh count once per replica (the count the shared state knows, as its buckets split by),
as if every replica spent as much, so the fleet stops at about the budget rather than ``replicas``
times it. The next refresh with the shared state healthy replaces the estimate by the shared totals
(the owed adds written back once); the estimate itself is never added to a shared counter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from router_core.shared.base import SharedState
from schemas.config.economics import BudgetBand, BudgetSettings
from schemas.config.routing import in_hours
from schemas.trace import Violation

__all__ = ["BudgetTracker", "BudgetView", "Window", "budget_violation", "cost_factor", "window_at"]

_DAY = 86_400
_SHIFT_S = 7_200  # the largest DST shift (Antarctica/Troll's): a repeated wall-time window ends this much later


@dataclass(frozen=True, slots=True)
class BudgetView:
    """What a decision needs of the budgets: the cost weight's factor and the models stopped."""

    band: str | None = None
    use: float = 0.0
    cost_factor: float = 1.0
    stopped: frozenset[str] = frozenset()
    governs_all: bool = False
    reason: str = ""

    def is_stopped(self, model: str) -> bool:
        """True when ``model`` may not be called until the window turns."""
        return self.governs_all and self.use >= 1.0 or model in self.stopped


def budget_violation(view: BudgetView) -> Violation:
    """The hard violation of a model the budget stopped."""
    return Violation(constraint="budget", metric="budget_use", op="<", value=round(view.use, 6), threshold=1.0,
                     reason=f"budget spent: {view.reason}")


@dataclass(frozen=True, slots=True)
class Window:
    """One budget window: its id and the POSIX seconds ``[start, end)`` over which that id surely holds."""

    id: str
    start: float
    end: float


def window_at(now: datetime, window_s: float, zone: ZoneInfo) -> Window:
    """The window of ``window_s`` seconds holding ``now`` (naive: UTC), aligned to local midnight in ``zone``.

    A window of a day is the local date (``2026-06-03``), from local midnight to the next. A shorter
    one (a whole number of seconds dividing a day, as the schema requires) is the ``k``-th of its
    day (``2026-06-03/10``), from local midnight + ``k * window_s`` of wall time: when the clocks
    go back a wall-time window comes round twice (its id too: it counts both), and one the clocks
    skip never comes. The bounds are where the id is sure to hold; a window a UTC-offset change
    falls in holds only ``now`` (the caller recomputes at once, for that window only).
    """
    aware = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    local = aware.astimezone(zone)
    day, t = local.date(), aware.timestamp()
    if window_s >= _DAY:
        start = datetime.combine(day, time(), zone).timestamp()
        end = datetime.combine(day + timedelta(days=1), time(), zone).timestamp()
        return Window(day.isoformat(), start, end) if start <= t < end else Window(day.isoformat(), t, t)
    wall = local.hour * 3600 + local.minute * 60 + local.second
    k = int(wall // window_s)
    wid = f"{day.isoformat()}/{k}"
    begin = float(int(t) - (wall - k * int(window_s)))  # whole seconds: the zone's offsets are whole seconds
    offset = local.utcoffset()
    if datetime.fromtimestamp(begin, zone).utcoffset() != offset or \
            datetime.fromtimestamp(begin + window_s - 1, zone).utcoffset() != offset:
        return Window(wid, t, t)
    return Window(wid, begin, begin + window_s)


def cost_factor(use: float, ramp_from: float, max_factor: float) -> float:
    """1 below ``ramp_from``, rising linearly (continuous, monotone) to ``max_factor`` at ``use`` 1."""
    x = min(1.0, max(0.0, (use - ramp_from) / (1.0 - ramp_from)))
    return 1.0 + (max_factor - 1.0) * x


class BudgetTracker:
    """The spend per band and window, from shared counters cached locally."""

    def __init__(self, settings: BudgetSettings, shared: SharedState) -> None:
        self.settings = settings
        self.shared = shared
        self._zone = ZoneInfo(settings.timezone)
        self._windows: dict[str, Window] = {}  # per band: the window last asked for, reused while ``now`` is in it
        self._cache: dict[str, float] = {}
        self._own: dict[str, float] = {}  # this worker's adds since the last good refresh (the estimate's part)
        self._estimating = False  # the shared state was down since the last good refresh
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def is_enabled(self) -> bool:
        """True when a band is configured."""
        return bool(self.settings.bands)

    def band_at(self, now: datetime) -> BudgetBand | None:
        """The first band whose hours hold ``now`` (local time)."""
        hour = (now if now.tzinfo is not None else now.replace(tzinfo=UTC)).astimezone(self._zone).hour
        return next((b for b in self.settings.bands if any(in_hours(hour, s, e) for s, e in b.hours)), None)

    def window(self, band: BudgetBand, now: datetime) -> Window:
        """``band``'s window holding ``now`` (:func:`window_at`), recomputed only when ``now`` leaves the last."""
        w = self._windows.get(band.name)
        t = now.timestamp() if now.tzinfo is not None else now.replace(tzinfo=UTC).timestamp()
        if w is None or not w.start <= t < w.end:
            w = self._windows[band.name] = window_at(now, band.window_s, self._zone)
        return w

    def _prefix(self, band: BudgetBand, now: datetime) -> str:
        return f"budget:{band.name}:{self.window(band, now).id}"

    @property
    def is_estimated(self) -> bool:
        """True while the figures are an estimate: the shared state is down, or was since the last good refresh."""
        return self._estimating or not self.shared.healthy

    def _others(self) -> int:
        """The other replicas an estimate counts this worker's own adds for (0: the figures are not estimated)."""
        if not self.is_estimated:
            return 0
        return max(1, self.shared.replicas) - 1  # the memory backend: this process alone

    def spend(self, band: BudgetBand, now: datetime) -> tuple[float, float, float]:
        """``(calls, governed calls, governed spend)`` in ``band``'s current window (local copy).

        While :attr:`is_estimated`, this worker's adds since the last good refresh count once per replica.
        """
        p, cache = self._prefix(band, now), self._cache
        calls, governed, spend = cache.get(p + ":calls", 0.0), cache.get(p + ":governed", 0.0), \
            cache.get(p + ":spend", 0.0)
        others = self._others()
        if others:
            own = self._own
            calls += others * own.get(p + ":calls", 0.0)
            governed += others * own.get(p + ":governed", 0.0)
            spend += others * own.get(p + ":spend", 0.0)
        return calls, governed, spend

    def use_of(self, band: BudgetBand, now: datetime) -> float:
        """Spend / budget of ``band`` now (1: at the budget)."""
        calls, governed, spend = self.spend(band, now)
        if band.max_share is not None:
            return governed / (band.max_share * max(calls, band.min_calls))
        assert band.max_spend is not None
        return spend / band.max_spend

    def view(self, now: datetime) -> BudgetView:
        """The budget as a decision at ``now`` sees it (no I/O)."""
        band = self.band_at(now)
        if band is None:
            return BudgetView()
        s, use = self.settings, self.use_of(band, now)
        factor = cost_factor(use, s.ramp_from, s.max_factor)
        stopped = frozenset(band.models) if use >= 1.0 else frozenset()
        what = f"{band.max_share:.0%} of calls" if band.max_share is not None else f"{band.max_spend:g} spend"
        reason = f"band {band.name}: {use:.0%} of its budget ({what} per {band.window_s:g} s)"
        if self.is_estimated:  # the trace and a violation say so; a replay reuses the recorded reason
            reason += " (estimated: shared state down, this worker's spend counted for every replica)"
        return BudgetView(band=band.name, use=use, cost_factor=factor, stopped=stopped,
                          governs_all=not band.models, reason=reason)

    def record(self, model: str, cost: float, now: datetime, *, calls: int = 1) -> None:
        """Count one served call (locally at once; into the shared counters in the background).

        ``calls`` 0: a spend alone (an answer's priced tokens against the expected price counted when it was
        served; negative when it cost less).
        """
        band = self.band_at(now)
        if band is None:
            return
        p, ttl = self._prefix(band, now), band.window_s + _SHIFT_S  # a DST day's 25 h; a wall window come round
        adds = [(p + ":calls", float(calls))] if calls else []
        if not band.models or model in band.models:
            adds += [(p + ":governed", float(calls)), (p + ":spend", cost)] if calls else [(p + ":spend", cost)]
        own = self._own
        for key, amount in adds:
            self._cache[key] = self._cache.get(key, 0.0) + amount
            own[key] = own.get(key, 0.0) + amount
        if not self.shared.healthy:
            self._estimating = True
        task = asyncio.get_running_loop().create_task(self._add(adds, ttl))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _add(self, adds: list[tuple[str, float]], ttl: float) -> None:
        for key, amount in adds:
            total = await self.shared.add(key, amount, ttl)
            self._cache[key] = max(self._cache.get(key, 0.0), total)

    async def refresh(self, now: datetime) -> None:
        """Re-read the current window's shared counters of every band (other replicas' spend).

        With the shared state healthy throughout, the totals read are the figures (an estimate ends);
        otherwise they are this worker's last known totals, and its own adds still count for every replica.
        """
        good, read = self.shared.healthy, False
        own, self._own = self._own, {}  # adds from here on come after this read
        keep: dict[str, float] = {}
        try:
            for band in self.settings.bands:
                p = self._prefix(band, now)
                for suffix in (":calls", ":governed", ":spend"):
                    keep[p + suffix] = max(await self.shared.get(p + suffix), 0.0)
            self._cache, read = keep, True
        finally:
            if good and read and self.shared.healthy:
                self._estimating = False
            else:  # not a good read: the adds since the last good one still count for every replica
                self._estimating = self._estimating or read or not self.shared.healthy
                for key, amount in own.items():
                    if key in keep or not read:  # once read, only the current windows' matter
                        self._own[key] = self._own.get(key, 0.0) + amount

    async def run(self, wall: Callable[[], datetime]) -> None:
        """Refresh every ``refresh_s`` until cancelled (a failing read keeps the last copy)."""
        while True:
            try:
                await self.refresh(wall())
            except (OSError, ConnectionError, TimeoutError):
                pass
            await asyncio.sleep(self.settings.refresh_s)

    def state(self, now: datetime) -> list[dict[str, object]]:
        """The ``budgets`` body of ``GET /v1/router/state``: every band's spend and use in its window."""
        active = self.band_at(now)
        out: list[dict[str, object]] = []
        for band in self.settings.bands:
            calls, governed, spend = self.spend(band, now)
            use = self.use_of(band, now)
            out.append({"band": band.name, "window": self.window(band, now).id, "active": band is active,
                        "models": band.models,
                        "max_share": band.max_share, "max_spend": band.max_spend, "window_s": band.window_s,
                        "calls": calls, "governed_calls": governed, "spend": round(spend, 6),
                        "use": round(use, 4), "stopped": use >= 1.0, "estimated": self.is_estimated,
                        "cost_factor": round(cost_factor(use, self.settings.ramp_from, self.settings.max_factor),
                                             4)})
        return out

