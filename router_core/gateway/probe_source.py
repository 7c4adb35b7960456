"""Where a gateway's probe verdicts come from: a prober in this process, or one it follows over HTTP.

The prober (``probes/``, wired by ``app.run.prober``) publishes its verdicts at
``GET /v1/probes/verdicts`` (:func:`feed_body`). A gateway that does not probe itself (a worker of
``serve --workers N``, whose store process probes once per host, or any gateway with
``probes.follow_url``) runs a :class:`VerdictFollower`: it polls that feed and hands each changed
verdict to the state view, so the ``probe`` filter sees the same verdicts in every process.

Silence is not health, through a follower either: while the prober does not answer, the follower
ages the newest result it knows of (the feed's ``last_result_age_s`` plus the time since it read
the feed), lists the prober's last alerts as of that read, and raises the prober's own watchdog
rule (``RouteLensProberSilent``) itself once that age reaches the rule's ``for_s``. The prober's
series it republishes on the gateway's ``/metrics`` (:meth:`VerdictFollower.metrics_text`) stay
those of its last answer meanwhile, so the alerts Prometheus draws from them hold as well, and its
``routelens_probe_last_result_timestamp_seconds`` says how old they are.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import aiohttp
import orjson
from pydantic import ValidationError

from schemas.config.probes import AlertRule, AlertSettings
from schemas.probe import ProbeStatus

__all__ = ["ProbeSource", "VerdictFollower", "feed_body"]

log = logging.getLogger(__name__)

Apply = Callable[[ProbeStatus, str], object]  # (verdict, instance id): StateView.set_probe
Runs = Callable[[str, str, int, int], object]  # (instance id, kind, results, ok_run): BreakerBoard.probe_run
WATCHDOG = "watchdog"  # the alert rule kind that fires on the prober's silence (schemas.config.probes.AlertRule)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _fingerprint(rule: str, instance: str, kind: str) -> str:
    # probes.alerts.rules.fingerprint, which router_core may not import: the same alert keeps one identity.
    return hashlib.sha256(f"{rule}\0{instance}\0{kind}".encode()).hexdigest()[:16]


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
              last_result_age_s: float | None, source: str,
              runs: Mapping[str, Mapping[str, list[int]]] | None = None) -> dict[str, Any]:
    """The published feed: verdicts per instance, active alerts, how old the newest result is, and runs.

    ``runs``: per instance and kind ``[results, ok_run]`` (results so far, the latest ``ok`` in a
    row), which the breakers' probe recovery counts.
    """
    return {"source": source, "last_result_age_s": None if last_result_age_s is None else round(last_result_age_s, 3),
            "verdicts": {i: [s.model_dump(mode="json") for s in v] for i, v in verdicts.items()},
            "alerts": alerts, "runs": {i: dict(by_kind) for i, by_kind in (runs or {}).items()}}


class VerdictFollower:
    """Polls a prober's feed and applies each verdict that changed to this gateway's state view.

    Args:
        url: The prober's base URL (``{url}/v1/probes/verdicts``).
        apply: Receives ``(verdict, instance)`` for every new or changed verdict, and a newer reading
            of one (its value or reason), so the router's state shows the latest.
        runs: Receives ``(instance, kind, results, ok_run)`` whenever the feed's count for a kind
            moved (every probe result: :meth:`router_core.resilience.breakers.BreakerBoard.probe_run`).
        interval_s: Seconds between polls.
        token: Bearer token for the feed (the prober's read token), if any.
        clock: Monotonic seconds (injected).
        wall: Wall time, for the ``since`` and ``as of`` of alerts (injected).
        alert_rules: The prober's alert rules (``probes.alerts.rules``); their watchdog rule, if
            any, is what the follower raises while the prober does not answer. None: the defaults
            (``RouteLensProberSilent``, critical, after 120 s, as the shipped Prometheus rule).
    """

    def __init__(self, url: str, apply: Apply, *, interval_s: float = 1.0, token: str | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], datetime] = _utcnow,
                 alert_rules: Sequence[AlertRule] | None = None, runs: Runs | None = None) -> None:
        self.url = url.rstrip("/")
        self._apply = apply
        self._runs = runs
        self._run_seen: dict[str, dict[str, list[int]]] = {}
        self._interval_s = interval_s
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._clock, self._wall = clock, wall
        rules = AlertSettings().rules if alert_rules is None else alert_rules
        self._watchdog = next((r for r in rules if r.kind == WATCHDOG), None)
        self._started, self._started_wall = clock(), wall()  # silence counts from here until a first answer
        self._seen: dict[tuple[str, str], tuple[str, datetime, float | None, str]] = {}
        self._statuses: dict[str, dict[str, ProbeStatus]] = {}
        self._alerts: list[dict[str, Any]] = []
        self._last_feed: dict[str, Any] = {}
        self._read_at: tuple[float, datetime] | None = None  # when the feed was last read (clock, wall)
        self._timeout_s = max(interval_s, 1.0)  # a poll's; one that runs out says so (a TimeoutError says nothing)
        self._series = b""  # the prober's probe series of its last answer to GET /metrics
        self._error: str | None = None
        self._down_since: datetime | None = None  # wall time of the first failed poll since the last answer
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Start polling in the background."""
        self._open()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop polling (and close the HTTP session that :meth:`start` or :meth:`poll_once` opened)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout_s))
        return self._session

    async def _run(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self._interval_s)

    async def poll_once(self) -> int:
        """Fetch the feed once and apply what changed; return how many verdicts changed (never raises).

        Without :meth:`start`, it opens the HTTP session itself (:meth:`stop` closes it).
        """
        session = self._open()
        try:
            async with session.get(f"{self.url}/v1/probes/verdicts", headers=self._headers) as resp:
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}")
                body = orjson.loads(await resp.read())
            changed = self.take(body)
        except (aiohttp.ClientError, TimeoutError, ValueError, TypeError, KeyError, ValidationError) as exc:
            why = str(exc) or (f"no answer within {self._timeout_s:g} s" if isinstance(exc, TimeoutError) else "")
            error = f"{type(exc).__name__}: {why}"[:200]
            if error != self._error:
                log.warning("probe verdicts from %s unavailable: %s", self.url, error)
            if self._error is None:
                self._down_since = self._wall()
            self._error = error
            return 0
        if self._error is not None:
            log.warning("probe verdicts from %s available again", self.url)
        self._error, self._down_since = None, None
        return changed

    async def metrics_text(self) -> bytes:
        """The prober's probe series, for the gateway's ``/metrics`` (``Gateway.metrics_sources``).

        Those of its last answer while it does not answer (within a second), and at once while its
        feed does not (:meth:`poll_once` says when it answers again): so the alerts Prometheus draws
        from them do not resolve on its silence, and ``RouteLensProberSilent`` pages for that silence
        from their ``routelens_probe_last_result_timestamp_seconds``, which stops moving. Empty until
        it first answers.
        """
        if self._session is None or self._error is not None:
            return self._series
        try:
            async with self._session.get(f"{self.url}/metrics", headers=self._headers,
                                         timeout=aiohttp.ClientTimeout(total=1.0)) as resp:
                if resp.status != 200:
                    return self._series
                text = await resp.read()
        except (aiohttp.ClientError, TimeoutError):
            return self._series
        # Only the probe families: the prober's pipeline series share names with the gateway's own.
        keep = [line for line in text.splitlines(keepends=True)
                if line.removeprefix(b"# HELP ").removeprefix(b"# TYPE ").startswith(b"routelens_probe_")]
        self._series = b"".join(keep)
        return self._series

    def take(self, body: dict[str, Any]) -> int:
        """Apply one feed body; return how many verdicts were new or changed (a newer reading counts)."""
        changed = 0
        for instance, statuses in body["verdicts"].items():
            for raw in statuses:
                status = ProbeStatus.model_validate(raw)
                key, mark = (instance, status.kind.value), (status.verdict.value, status.since, status.value,
                                                             status.reason)
                self._statuses.setdefault(instance, {})[key[1]] = status
                if self._seen.get(key) != mark:
                    self._seen[key] = mark
                    self._apply(status, instance)
                    changed += 1
        for instance, by_kind in (body.get("runs") or {}).items():
            seen = self._run_seen.setdefault(instance, {})
            for kind, (results, ok_run) in by_kind.items():
                if seen.get(kind) != [results, ok_run]:
                    seen[kind] = [int(results), int(ok_run)]
                    if self._runs is not None:
                        self._runs(instance, str(kind), int(results), int(ok_run))
        self._alerts = list(body.get("alerts") or [])
        self._last_feed = {k: v for k, v in body.items() if k not in ("verdicts", "alerts", "runs")}
        self._read_at = (self._clock(), self._wall())
        return changed

    def feed(self) -> dict[str, Any]:
        """What this follower knows, in the feed's shape (a follower can be followed)."""
        by_instance = {i: [by_kind[k] for k in sorted(by_kind)] for i, by_kind in self._statuses.items()}
        return feed_body(by_instance, self.alerts(), self.last_result_age_s(), f"follow:{self.url}", self._run_seen)

    def last_result_age_s(self) -> float | None:
        """How old the prober's newest result is now: the feed's age plus the time since it was read.

        None while no feed read so far had a result in it.
        """
        age = self._last_feed.get("last_result_age_s")
        if self._read_at is None or not isinstance(age, int | float):
            return None
        return float(age) + max(self._clock() - self._read_at[0], 0.0)

    def alerts(self) -> list[dict[str, Any]]:
        """The active alerts: the prober's, as it serves them, while it answers.

        While it does not, its alerts of the last answer are listed with ``as_of`` (that answer's
        wall time, also in their summary), and the watchdog rule fires here once the prober's
        newest known result (with none known: the last answer, or the follower's creation) is
        ``for_s`` old, in the shape of the prober's own watchdog alert, replacing a copy of it.
        """
        if self._error is None and self._read_at is not None:
            return list(self._alerts)
        listed = [self._as_of(a) for a in self._alerts]
        rule = self._watchdog
        if rule is None:
            return listed
        known = self.last_result_age_s()
        silent = known if known is not None else self._clock() - (
            self._read_at[0] if self._read_at is not None else self._started)
        if silent < rule.for_s:
            return listed
        mine = self._silent_alert(rule, silent)
        return [mine, *(a for a in listed if a.get("fingerprint") != mine["fingerprint"])]

    def problem(self) -> str | None:
        """Why the followed verdicts may be out of date, or None."""
        if self._error is not None:
            since = "" if self._down_since is None else f" since {self._down_since.isoformat()}"
            return f"probe verdicts from {self.url} unavailable{since} ({self._error})"
        return None

    def _as_of(self, alert: dict[str, Any]) -> dict[str, Any]:
        if self._read_at is None:
            return dict(alert)
        at = self._read_at[1].isoformat()
        summary = alert.get("summary") or alert.get("name") or ""
        return {**alert, "summary": f"{summary} (as of {at}, the prober's last answer)", "as_of": at}

    def _silent_alert(self, rule: AlertRule, silent: float) -> dict[str, Any]:
        """The prober's watchdog alert (``probes.alerts.manager``'s shape), raised by this follower."""
        down = self._down_since or (self._read_at[1] if self._read_at is not None else self._started_wall)
        why = self._error or "no answer yet"
        summary = (f"{rule.summary or rule.name}: the prober at {self.url} has not answered since "
                   f"{down.isoformat()} ({why}); no probe result for {silent:.0f} s")
        labels = {"alertname": rule.name, "kind": WATCHDOG, "severity": rule.severity, **rule.labels}
        return {"name": rule.name, "severity": rule.severity, "state": "firing", "instance": None, "model": None,
                "kind": WATCHDOG, "since": (self._wall() - timedelta(seconds=silent - rule.for_s)).isoformat(),
                "value": round(silent, 3), "summary": summary,
                "description": f"the prober: value {round(silent, 3):g} {why}",
                "labels": {k: v for k, v in labels.items() if v},
                "fingerprint": _fingerprint(rule.name, "", WATCHDOG)}
