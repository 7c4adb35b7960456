"""Polls every instance's ``/metrics`` and feeds the :class:`router_core.state.StateView`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import aiohttp

from router_core.metrics_parse import MetricsParseError, parse_engine_metrics
from router_core.state import StateView
from schemas.fleet import InstanceSpec

__all__ = ["MetricsScraper"]

log = logging.getLogger(__name__)


class MetricsScraper:
    """Scrapes all instances concurrently every ``interval_s`` with bounded timeouts.

    Args:
        specs: Instances to scrape.
        view: Where results go.
        session: A shared aiohttp session (the gateway's pooled client).
        interval_s: Time between rounds.
        timeout_s: Bound on one scrape.
        on_round: Called after each round has been folded into the view (e.g. to store the
            round's snapshots).
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
    ) -> None:
        self._specs = specs
        self._view = view
        self._session = session
        self._interval_s = interval_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._on_round = on_round

    async def scrape_once(self) -> None:
        """Scrape every instance once, concurrently, then let the view re-evaluate its latches."""
        await asyncio.gather(*(self._scrape(spec) for spec in self._specs))
        self._view.tick()
        if self._on_round is not None:
            self._on_round()

    async def run(self) -> None:
        """Scrape every ``interval_s`` forever (the first round after one interval); cancel to stop."""
        while True:
            await asyncio.sleep(self._interval_s)
            await self.scrape_once()

    async def _scrape(self, spec: InstanceSpec) -> None:
        try:
            async with self._session.get(f"{spec.url}/metrics", timeout=self._timeout) as resp:
                if resp.status != 200:
                    self._view.update(spec.id, None, f"HTTP {resp.status}")
                    return
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._view.update(spec.id, None, f"{type(exc).__name__}: {exc}"[:200])
            return
        try:
            gauges = parse_engine_metrics(text)
        except MetricsParseError as exc:
            self._view.update(spec.id, None, str(exc)[:200])
            return
        self._view.update(spec.id, gauges)
