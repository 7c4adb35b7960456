"""Polls every instance's ``/metrics`` and feeds the :class:`router_core.state.StateView`.

Hostile instances are contained to themselves: every failure of one scrape, of any kind (status,
timeout, connection, a body that is not UTF-8, unparseable text, no gauges, out-of-range gauges,
or an unexpected exception), marks that instance failed with a reason from
:data:`router_core.state.scrape_metrics.SCRAPE_FAILURE_REASONS`, is counted in
``routelens_scrape_failures_total{instance, reason}`` and is logged once per change of reason, not
once per round. The loop itself cannot die of a round that raises; if it stalls anyway (a wedged
event loop, a callback that never returns), :meth:`MetricsScraper.stall_reason` says so.

Instances declared ``engine: external`` (no ``/metrics``: a hosted API, say) are not scraped at
all: no request, no failure counted, never in :meth:`MetricsScraper.failing`; the view judges
them by what the gateway itself sees (:mod:`router_core.state.view`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import aiohttp

from router_core.state.parse import EngineGauges, MetricsParseError, parse_engine_metrics
from router_core.state.scrape_metrics import ScrapeMetrics
from router_core.state.view import StateView
from schemas.fleet import EXTERNAL, InstanceSpec

__all__ = ["MetricsScraper"]

log = logging.getLogger(__name__)
_DETAIL_CHARS = 200


class _ScrapeFailed(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class MetricsScraper:
    """Scrapes all instances concurrently every ``interval_s`` with bounded timeouts.

    Args:
        specs: The fleet; its external instances are left out (never scraped).
        view: Where results go.
        session: A shared aiohttp session (the gateway's pooled client).
        interval_s: Time between rounds.
        timeout_s: Bound on one scrape.
        on_round: Called after each round has been folded into the view (e.g. to store the
            round's snapshots); an exception it raises is logged and does not stop the loop.
        metrics: Failure and round counters (none recorded when omitted).
        clock: Monotonic seconds, for stall detection (injected).
        wall: Unix seconds, for ``routelens_scrape_last_round_timestamp_seconds`` (injected).
    """

    def __init__(
        self,
        specs: Sequence[InstanceSpec],
        view: StateView,
        session: aiohttp.ClientSession,
        *,
        interval_s: float = 1.0,
        timeout_s: float = 0.5,
        on_round: Callable[[], None] | None = None,
        metrics: ScrapeMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._specs = [s for s in specs if s.engine != EXTERNAL]
        self._view = view
        self._session = session
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._on_round = on_round
        self._metrics = metrics
        self._clock = clock
        self._wall = wall
        self._last_round = clock()  # a loop that never completes a round is stalled from its start
        self._failing: dict[str, str] = {}  # instance -> the reason it is failing for now
        self._errors: dict[str, str] = {}  # what went wrong -> exception type, logged once per change

    @property
    def stall_after_s(self) -> float:
        """Without a completed round for this long, the loop counts as stalled."""
        return 3 * self._interval_s + self._timeout_s

    def last_round_age_s(self) -> float:
        """Seconds since the last round completed (or since the scraper was built)."""
        return max(self._clock() - self._last_round, 0.0)

    def stall_reason(self) -> str | None:
        """Why scraping is stalled, or None while rounds keep completing."""
        age = self.last_round_age_s()
        if age <= self.stall_after_s:
            return None
        return f"scrape loop stalled: no round completed for {age:.1f}s (bound {self.stall_after_s:.1f}s)"

    def failing(self) -> dict[str, str]:
        """Instances whose last scrape failed (or had gauges refused), with the reason."""
        return dict(self._failing)

    async def scrape_once(self) -> None:
        """Scrape every instance once, concurrently, then let the view re-evaluate its latches."""
        await asyncio.gather(*(self._scrape(spec) for spec in self._specs))
        self._view.tick()
        if self._on_round is not None:
            try:
                self._on_round()
            except Exception as exc:  # storage trouble is the storage's to report; scraping goes on
                self._round_failed(exc, "after-round callback failed")
            else:
                self._errors.pop("after-round callback failed", None)
        self._last_round = self._clock()
        if self._metrics is not None:
            self._metrics.record_round(self._wall())

    async def run(self) -> None:
        """Scrape every ``interval_s`` forever (the first round after one interval); cancel to stop."""
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.scrape_once()
            except Exception as exc:  # a bug must not end scraping for every instance, for good
                self._round_failed(exc, "scrape round failed")
            else:
                self._errors.pop("scrape round failed", None)

    def _round_failed(self, exc: Exception, what: str) -> None:
        if self._errors.get(what) != type(exc).__name__:
            log.error("%s; scraping goes on: %s", what, exc, exc_info=exc)
            self._errors[what] = type(exc).__name__

    async def _scrape(self, spec: InstanceSpec) -> None:
        try:
            gauges = await self._fetch(spec)
        except _ScrapeFailed as exc:
            self._failed(spec.id, exc.reason, str(exc))
        except MetricsParseError as exc:
            self._failed(spec.id, exc.reason, str(exc))
        except Exception as exc:  # anything else one instance provokes stays with that instance
            self._failed(spec.id, "internal", f"{type(exc).__name__}: {exc}")
        else:
            self._view.update(spec.id, gauges)
            if gauges.has_refused:
                self._count(spec.id, "out_of_range", "; ".join(gauges.adjustments))
            else:
                self._recovered(spec.id)

    async def _fetch(self, spec: InstanceSpec) -> EngineGauges:
        try:
            async with self._session.get(f"{spec.url}/metrics", timeout=self._timeout) as resp:
                if resp.status != 200:
                    raise _ScrapeFailed("http_status", f"HTTP {resp.status}")
                body = await resp.read()
        except TimeoutError as exc:
            raise _ScrapeFailed("timeout", f"no answer within {self._timeout_s:g}s") from exc
        except aiohttp.ClientError as exc:
            raise _ScrapeFailed("connect", f"{type(exc).__name__}: {exc}") from exc
        return parse_engine_metrics(body)

    def _failed(self, instance: str, reason: str, detail: str) -> None:
        self._view.update(instance, None, f"{reason}: {detail}"[:_DETAIL_CHARS])
        self._count(instance, reason, detail)

    def _count(self, instance: str, reason: str, detail: str) -> None:
        if self._metrics is not None:
            self._metrics.record_failure(instance, reason)
        if self._failing.get(instance) != reason:
            log.warning("scrape of %s failing (%s): %s", instance, reason, detail[:_DETAIL_CHARS])
            self._failing[instance] = reason

    def _recovered(self, instance: str) -> None:
        reason = self._failing.pop(instance, None)
        if reason is not None:
            log.warning("scrape of %s recovered (was failing: %s)", instance, reason)
