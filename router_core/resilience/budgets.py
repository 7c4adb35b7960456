"""Tiered cost budgets per time band (seed 002 §5.1, problem 3).

A band (local hours, first match wins) governs some models with a budget per window: a share of
all calls (``max_share``, of at least ``min_calls``) or a spend (``max_spend``, in ``cost.base``
units). Its *use* is spend / budget. From ``ramp_from`` of the budget the cost weight rises
linearly to ``max_factor`` at it; at the budget the governed models are stopped (infeasible).

Counters live in :class:`SharedState` so replicas add up: ``budget:<band>:<window>:calls``,
``:governed`` and ``:spend``. :meth:`BudgetTracker.view` reads only the local copy (a pure,
cheap call for the request path); :meth:`BudgetTracker.refresh` re-reads the shared totals and
:meth:`BudgetTracker.record` adds to them in the background.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from router_core.shared.base import SharedState
from schemas.config.economics import BudgetBand, BudgetSettings
from schemas.trace import Violation

__all__ = ["BudgetTracker", "BudgetView", "budget_violation", "cost_factor"]


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
        self._cache: dict[str, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def is_enabled(self) -> bool:
        """True when a band is configured."""
        return bool(self.settings.bands)

    def band_at(self, now: datetime) -> BudgetBand | None:
        """The first band whose hours hold ``now`` (local time)."""
        hour = now.astimezone(self._zone).hour
        return next((b for b in self.settings.bands if any(s <= hour < e for s, e in b.hours)), None)

    def _prefix(self, band: BudgetBand, now: datetime) -> str:
        return f"budget:{band.name}:{int(now.timestamp() // band.window_s)}"

    def spend(self, band: BudgetBand, now: datetime) -> tuple[float, float, float]:
        """``(calls, governed calls, governed spend)`` in ``band``'s current window (local copy)."""
        p = self._prefix(band, now)
        return self._cache.get(p + ":calls", 0.0), self._cache.get(p + ":governed", 0.0), \
            self._cache.get(p + ":spend", 0.0)

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
        return BudgetView(band=band.name, use=use, cost_factor=factor, stopped=stopped,
                          governs_all=not band.models, reason=reason)

    def record(self, model: str, cost: float, now: datetime) -> None:
        """Count one served call (locally at once; into the shared counters in the background)."""
        band = self.band_at(now)
        if band is None:
            return
        p, ttl = self._prefix(band, now), band.window_s * 2
        adds = [(p + ":calls", 1.0)]
        if not band.models or model in band.models:
            adds += [(p + ":governed", 1.0), (p + ":spend", cost)]
        for key, amount in adds:
            self._cache[key] = self._cache.get(key, 0.0) + amount
        task = asyncio.get_running_loop().create_task(self._add(adds, ttl))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _add(self, adds: list[tuple[str, float]], ttl: float) -> None:
        for key, amount in adds:
            total = await self.shared.add(key, amount, ttl)
            self._cache[key] = max(self._cache.get(key, 0.0), total)

    async def refresh(self, now: datetime) -> None:
        """Re-read the current window's shared counters of every band (other replicas' spend)."""
        keep: dict[str, float] = {}
        for band in self.settings.bands:
            p = self._prefix(band, now)
            for suffix in (":calls", ":governed", ":spend"):
                keep[p + suffix] = max(await self.shared.get(p + suffix), 0.0)
        self._cache = keep

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
            out.append({"band": band.name, "active": band is active, "models": band.models,
                        "max_share": band.max_share, "max_spend": band.max_spend, "window_s": band.window_s,
                        "calls": calls, "governed_calls": governed, "spend": round(spend, 6),
                        "use": round(use, 4), "stopped": use >= 1.0,
                        "cost_factor": round(cost_factor(use, self.settings.ramp_from, self.settings.max_factor),
                                             4)})
        return out

