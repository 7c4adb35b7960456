"""Where a gateway's probe verdicts come from: a prober in this process, or one it follows over HTTP.

The prober (``probes/``, wired by ``app.run.prober``) publishes its verdicts at
``GET /v1/probes/verdicts`` (:func:`feed_body`). A gateway that does not probe itself (a worker of
``serve --workers N``, whose store process probes once per host, or any gateway with
``probes.follow_url``) runs a :class:`VerdictFollower`: it polls that feed and hands each changed
verdict to the state view, so the ``probe`` filter sees the same verdicts in every process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

import aiohttp
import orjson
from pydantic import ValidationError

from schemas.probe import ProbeStatus

__all__ = ["ProbeSource", "VerdictFollower", "feed_body"]

log = logging.getLogger(__name__)

Apply = Callable[[ProbeStatus, str], object]  # (verdict, instance id): StateView.set_probe


class ProbeSource(Protocol):
    """What the gateway asks of its probes: lifecycle, the published feed, alerts and health."""

    async def start(self) -> None:
        """Begin probing (or following)."""
        ...

    async def stop(self) -> None:
        """Stop and release what it holds."""
        ...

    def feed(self) -> dict[str, Any]:
        """The ``GET /v1/probes/verdicts`` body (see :func:`feed_body`)."""
        ...

    def alerts(self) -> list[dict[str, Any]]:
        """The active alerts (``GET /v1/alerts``)."""
        ...

    def problem(self) -> str | None:
        """Why the verdicts cannot be trusted now (prober silent, feed unreachable), or None."""
        ...


def feed_body(verdicts: Mapping[str, list[ProbeStatus]], alerts: list[dict[str, Any]],
              last_result_age_s: float | None, source: str) -> dict[str, Any]:
    """The published feed: verdicts per instance, active alerts, and how old the newest result is."""
    return {"source": source, "last_result_age_s": None if last_result_age_s is None else round(last_result_age_s, 3),
            "verdicts": {i: [s.model_dump(mode="json") for s in v] for i, v in verdicts.items()},
            "alerts": alerts}


class VerdictFollower:
    """Polls a prober's feed and applies each verdict that changed to this gateway's state view.

    Args:
        url: The prober's base URL (``{url}/v1/probes/verdicts``).
        apply: Receives ``(verdict, instance)`` for every new or changed verdict.
        interval_s: Seconds between polls.
        token: Bearer token for the feed (the prober's read token), if any.
        clock: Monotonic seconds (injected).
    """

    def __init__(self, url: str, apply: Apply, *, interval_s: float = 1.0, token: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url.rstrip("/")
        self._apply = apply
        self._interval_s = interval_s
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._clock = clock
        self._seen: dict[tuple[str, str], tuple[str, datetime]] = {}
        self._statuses: dict[str, dict[str, ProbeStatus]] = {}
        self._alerts: list[dict[str, Any]] = []
        self._last_ok: float | None = None
        self._last_feed: dict[str, Any] = {}
        self._error: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Start polling in the background."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=max(self._interval_s, 1.0)))
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop polling."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    async def _run(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self._interval_s)

    async def poll_once(self) -> int:
        """Fetch the feed once and apply what changed; return how many verdicts changed (never raises)."""
        assert self._session is not None, "start() first"
        try:
            async with self._session.get(f"{self.url}/v1/probes/verdicts", headers=self._headers) as resp:
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}")
                body = orjson.loads(await resp.read())
            changed = self.take(body)
        except (aiohttp.ClientError, TimeoutError, ValueError, TypeError, KeyError, ValidationError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:200]
            if error != self._error:
                log.warning("probe verdicts from %s unavailable: %s", self.url, error)
            self._error = error
            return 0
        if self._error is not None:
            log.warning("probe verdicts from %s available again", self.url)
        self._error, self._last_ok = None, self._clock()
        return changed

    async def metrics_text(self) -> bytes:
        """The prober's probe series, for a gateway's ``/metrics`` (empty when it does not answer within a second).

        The prober ``serve`` started listens on a port of its own that nobody is told about, so the
        gateway republishes them (:attr:`router_core.gateway.server.Gateway.metrics_sources`).
        """
        if self._session is None:
            return b""
        try:
            async with self._session.get(f"{self.url}/metrics", timeout=aiohttp.ClientTimeout(total=1.0)) as resp:
                text = await resp.read() if resp.status == 200 else b""
        except (aiohttp.ClientError, TimeoutError):
            return b""
        # Only the probe families: the prober's pipeline series share names with the gateway's own.
        keep = [line for line in text.splitlines(keepends=True)
                if line.removeprefix(b"# HELP ").removeprefix(b"# TYPE ").startswith(b"routelens_probe_")]
        return b"".join(keep)

    def take(self, body: dict[str, Any]) -> int:
        """Apply one feed body; return how many verdicts were new or changed."""
        changed = 0
        for instance, statuses in body["verdicts"].items():
            for raw in statuses:
                status = ProbeStatus.model_validate(raw)
                key, mark = (instance, status.kind.value), (status.verdict.value, status.since)
                self._statuses.setdefault(instance, {})[key[1]] = status
                if self._seen.get(key) != mark:
                    self._seen[key] = mark
                    self._apply(status, instance)
                    changed += 1
        self._alerts = list(body.get("alerts") or [])
        self._last_feed = {k: v for k, v in body.items() if k not in ("verdicts", "alerts")}
        return changed

    def feed(self) -> dict[str, Any]:
        """What this follower knows, in the feed's shape (a follower can be followed)."""
        by_instance = {i: [by_kind[k] for k in sorted(by_kind)] for i, by_kind in self._statuses.items()}
        return feed_body(by_instance, self._alerts, self._last_feed.get("last_result_age_s"), f"follow:{self.url}")

    def alerts(self) -> list[dict[str, Any]]:
        """The prober's active alerts, as of the last successful poll."""
        return self._alerts

    def problem(self) -> str | None:
        """Why the followed verdicts may be out of date, or None."""
        if self._error is not None:
            return f"probe verdicts from {self.url} unavailable ({self._error})"
        return None
