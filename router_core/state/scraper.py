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

A big fleet (a platform team's 100-300 instances) shapes two choices:

- At most ``max_in_flight`` scrapes run at once (:data:`MAX_IN_FLIGHT`), and each one's
  ``timeout_s`` starts when it does. Every scrape costs the event loop CPU (reading the answer,
  parsing it: about 1 ms, 2 with a real vLLM body); with all 200 sent at once, the last answers
  waited behind the others' parsing and ran out of their 0.5 s without the instance being slow
  (49 of 200 timed out every round with real vLLM bodies, and a timed-out instance goes stale:
  treated as saturated). A scrape now waits at most for the CPU of ``max_in_flight - 1`` others.
- Rounds start every ``interval_s`` (start to start, as a Prometheus scrape interval), not
  ``interval_s`` after the previous round ended: at 200 instances a round of 0.25-1 s made the
  period 1.25-2 s. A round longer than the interval is followed by the next at once (never two
  at a time), is logged once per change (``scrape rounds overrun``) and is visible in
  ``routelens_scrape_round_duration_seconds`` and :meth:`MetricsScraper.last_round_s`.

Several gateway workers scrape once between them: the worker that scrapes hands each round to
taps (:meth:`MetricsScraper.add_tap`), and another worker takes it with
:meth:`MetricsScraper.follow` (:mod:`router_core.state.scrape_round` is the message). A
follower's own loop skips its rounds while another's keep arriving, and scrapes for itself again
once none has arrived for :data:`FOLLOW_FOR` intervals (logged once each way).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence

import aiohttp

from router_core.state.parse import EngineGauges, MetricsParseError, parse_engine_metrics
from router_core.state.scrape_metrics import ScrapeMetrics
from router_core.state.scrape_round import ScrapeResult
from router_core.state.view import StateView
from schemas.fleet import EXTERNAL, InstanceSpec

__all__ = ["FOLLOW_FOR", "MAX_IN_FLIGHT", "MetricsScraper", "RoundTap"]

log = logging.getLogger(__name__)
_DETAIL_CHARS = 200
MAX_IN_FLIGHT = 32  # scrapes at once: at ~2 ms of CPU each, a scrape waits at most ~60 ms for the others
FOLLOW_FOR = 2.5  # intervals a followed round stands for: a round late by more than 1.5 intervals is not waited for
RoundTap = Callable[[int, float | None, list[ScrapeResult]], None]  # (round number, its duration, its results)


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
        clock: Monotonic seconds, for stall detection and the rounds' cadence (injected).
        wall: Unix seconds, for ``routelens_scrape_last_round_timestamp_seconds`` (injected).
        max_in_flight: Scrapes running at once; each one's timeout starts when it does.
        sleep: Awaitable sleep on ``clock`` (injected in tests).
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
        max_in_flight: int = MAX_IN_FLIGHT,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        self._specs = [s for s in specs if s.engine != EXTERNAL]
        self._max_in_flight = max_in_flight
        self._slots = asyncio.Semaphore(max_in_flight)
        self._sleep = sleep
        self._last_round_s: float | None = None  # how long the last completed round took
        self._overrun = False  # whether the last round took longer than the interval (logged on change)
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
        self._taps: list[RoundTap] = []
        self._results: list[ScrapeResult] | None = None  # the round being scraped, collected while taps are
        self._seq = 0
        self._followed_until = -math.inf  # until then another worker's rounds stand for this one's own
        self._following = False
        self._fell_back = False  # it followed, then scraped for itself when rounds stopped

    @property
    def stall_after_s(self) -> float:
        """Without a completed round for this long, the loop counts as stalled.

        Three intervals and the longest a healthy round can take: every instance hanging until
        its timeout, ``max_in_flight`` at a time.
        """
        waves = max(math.ceil(len(self._specs) / self._max_in_flight), 1)
        return 3 * self._interval_s + waves * self._timeout_s

    @property
    def interval_s(self) -> float:
        """Seconds from one round's start to the next's."""
        return self._interval_s

    def last_round_s(self) -> float | None:
        """How long the last completed round took (None before the first)."""
        return self._last_round_s

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

    @property
    def following(self) -> bool:
        """Whether another worker's rounds stand for this one's own now."""
        return self._clock() < self._followed_until

    def add_tap(self, tap: RoundTap) -> None:
        """Hand every round this scraper completes to ``tap`` (an exception it raises is logged, not raised)."""
        self._taps.append(tap)

    def follow(self, seq: int, took_s: float | None, results: list[ScrapeResult]) -> None:
        """Take another worker's round as this one's own: the view, the failing set, the round's counters.

        Results for instances this scraper does not know (another fleet) are left out, and so is
        what is older than this view's own: gauges scraped before the ones it holds, and a failure
        in a round with nothing newer than them (a round the other worker finished late, stopped
        mid-round, after this one scraped for itself). Nothing is logged or counted per instance:
        the worker that scraped did that.
        """
        newest = max((r.scraped_at for r in results if r.gauges is not None and r.scraped_at is not None),
                     default=None)
        for r in results:
            if not self._view.knows(r.instance):
                continue
            held = self._view.scraped_at(r.instance)
            if r.gauges is None and held is not None and newest is not None and newest < held:
                continue  # this worker scraped it well since the round's last good scrape
            if not self._view.update(r.instance, r.gauges, r.error, at=r.scraped_at):
                continue
            if r.reason is None:
                self._failing.pop(r.instance, None)
            else:
                self._failing[r.instance] = r.reason
        self._finish_round(took_s=took_s)
        self._followed_until = self._clock() + FOLLOW_FOR * self._interval_s
        if not self._following:
            if self._fell_back:  # it scraped for itself meanwhile: the change back is worth a line too
                log.warning("following another worker's scrape rounds again (round %d)", seq)
            else:
                log.info("following another worker's scrape rounds (round %d): this worker scrapes no instance "
                         "while they arrive", seq)
            self._following, self._fell_back = True, False

    async def scrape_once(self) -> None:
        """Scrape every instance once, ``max_in_flight`` at a time, then let the view re-evaluate its latches."""
        started = self._clock()
        self._results = [] if self._taps else None
        await asyncio.gather(*(self._scrape(spec) for spec in self._specs))
        results, self._results = self._results, None
        took = self._finish_round(started=started)
        self._note_overrun(took)
        if results is not None:
            self._seq += 1
            for tap in self._taps:
                try:
                    tap(self._seq, took, results)
                except Exception as exc:  # a follower's trouble is its own; scraping goes on
                    self._round_failed(exc, "round tap failed")
                else:
                    self._errors.pop("round tap failed", None)

    def _finish_round(self, *, started: float | None = None, took_s: float | None = None) -> float:
        """Tick the view, call ``on_round``, count the round; return its duration.

        ``started``: when this worker's own round started (its duration runs to now); else
        ``took_s``, the followed round's duration as its worker measured it (0 when unknown).
        """
        self._view.tick()
        if self._on_round is not None:
            try:
                self._on_round()
            except Exception as exc:  # storage trouble is the storage's to report; scraping goes on
                self._round_failed(exc, "after-round callback failed")
            else:
                self._errors.pop("after-round callback failed", None)
        self._last_round = self._clock()
        took = self._last_round - started if started is not None else took_s or 0.0
        self._last_round_s = took = max(took, 0.0)
        if self._metrics is not None:
            self._metrics.record_round(self._wall(), took)
        return took

    async def run(self) -> None:
        """Start a round every ``interval_s`` forever (the first after one interval); cancel to stop.

        The interval runs from one round's start to the next's; a round that takes longer is
        followed by the next at once.
        """
        await self._sleep(self._interval_s)
        while True:
            started = self._clock()
            if self.following:  # another worker's rounds stand for this one's
                await self._sleep(self._interval_s)
                continue
            if self._following:
                log.warning("no scrape round from another worker for %.1fs: this worker scrapes for itself again",
                            FOLLOW_FOR * self._interval_s)
                self._following, self._fell_back = False, True
            try:
                await self.scrape_once()
            except Exception as exc:  # a bug must not end scraping for every instance, for good
                self._round_failed(exc, "scrape round failed")
            else:
                self._errors.pop("scrape round failed", None)
            await self._sleep(max(self._interval_s - (self._clock() - started), 0.0))

    def _note_overrun(self, took: float) -> None:
        """Log when rounds start, or stop, taking longer than the interval (once per change)."""
        over = took > self._interval_s
        if over and not self._overrun:
            log.warning("scrape rounds overrun: a round of %d instances took %.2fs, longer than scrape.interval_s "
                        "(%gs); state is older than the interval says (see docs/deployment.md, A big fleet)",
                        len(self._specs), took, self._interval_s)
        elif self._overrun and not over:
            log.warning("scrape rounds back within scrape.interval_s (%gs): the last took %.2fs",
                        self._interval_s, took)
        self._overrun = over

    def _round_failed(self, exc: Exception, what: str) -> None:
        if self._errors.get(what) != type(exc).__name__:
            log.error("%s; scraping goes on: %s", what, exc, exc_info=exc)
            self._errors[what] = type(exc).__name__

    async def _scrape(self, spec: InstanceSpec) -> None:
        async with self._slots:  # the timeout starts with the scrape, not while it waits its turn
            await self._scrape_now(spec)

    async def _scrape_now(self, spec: InstanceSpec) -> None:
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
            self._collect(spec.id, gauges, None)

    def _collect(self, instance: str, gauges: EngineGauges | None, error: str | None) -> None:
        """Keep this instance's result for the round's taps (when there are taps)."""
        if self._results is not None:
            self._results.append(ScrapeResult(instance, gauges, error, self._failing.get(instance),
                                              self._view.scraped_at(instance)))

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
        error = f"{reason}: {detail}"[:_DETAIL_CHARS]
        self._view.update(instance, None, error)
        self._count(instance, reason, detail)
        self._collect(instance, None, error)

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
