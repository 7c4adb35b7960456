"""The alert manager: rules over probe results, notifications to webhooks, a router event per change.

:meth:`AlertManager.observe` takes every probe result with its hysteresis status; :meth:`evaluate`
(every ``evaluate_every_s`` in :meth:`run_forever`) moves alerts pending → firing → resolved, queues
one Alertmanager-format notification per change (and per ``repeat_interval_s`` while firing) to
every webhook, and hands a :class:`RouterEvent` (kind ``alert``, message ``"firing: <rule> on
<instance> (<kind>): <summary>"`` or ``"resolved: ..."``; severity critical→error, warning→warning,
info→info for a firing, info for a resolve) to ``on_event``. :meth:`active` is what
``GET /v1/alerts`` returns.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal

from probes.alerts.notify import AiohttpPost, Post, WebhookNotifier, payload
from probes.alerts.rules import Alert, RuleBook, Transition
from schemas.config.probes import AlertSettings
from schemas.probe import ProbeResult, ProbeStatus
from schemas.records import RouterEvent

__all__ = ["EVENT_SEVERITY", "AlertManager"]

log = logging.getLogger(__name__)

EVENT_SEVERITY: dict[str, Literal["info", "warning", "error"]] = {
    "critical": "error", "warning": "warning", "info": "info"}


def _utcnow() -> datetime:
    return datetime.now(UTC)


class AlertManager:
    """Evaluates the alert rules and delivers what changed.

    Args:
        settings: The rules, the webhooks and the evaluation period.
        on_event: Takes a ``RouterEvent`` per firing and resolve (its errors are logged and contained).
        post: HTTP POST ``(url, body, headers, timeout_s) -> status``; None: aiohttp.
        wall: Wall time for events and notification timestamps.
        clock: Monotonic seconds for ``for_s``, repeats and the watchdog.
        last_result_at: The prober's latest result on ``clock`` (``ProbeScheduler.last_result_at``).
        external_url: This gateway's URL, for ``externalURL`` and ``generatorURL``.
        sleep: Awaitable sleep (evaluation period and delivery backoff).
    """

    def __init__(
        self,
        settings: AlertSettings,
        *,
        on_event: Callable[[RouterEvent], None],
        post: Post | None = None,
        wall: Callable[[], datetime] = _utcnow,
        clock: Callable[[], float] = time.monotonic,
        last_result_at: Callable[[], float | None],
        external_url: str = "",
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._settings = settings
        self._on_event, self._wall, self._sleep = on_event, wall, sleep
        self._external_url = external_url
        self._book = RuleBook(list(settings.rules), clock=clock, last_result_at=last_result_at)
        self._own_post: AiohttpPost | None = None
        if post is None:
            post = self._own_post = AiohttpPost()
        self.notifiers = [WebhookNotifier(w, post, sleep=sleep) for w in settings.webhooks]
        self._events = 0

    def observe(self, result: ProbeResult, status: ProbeStatus | None) -> None:
        """Take one probe result and its (instance, kind)'s current status (None: keep the last seen)."""
        self._book.observe(result, status)

    def forget(self, instance: str) -> None:
        """Drop an instance that left the fleet; its alerts resolve at the next evaluation."""
        self._book.forget(instance)

    async def evaluate(self) -> list[Transition]:
        """One evaluation: returns the transitions, queues their notifications and emits their events."""
        transitions = self._book.evaluate(self._wall())
        for t in transitions:
            if t.action != "repeat":
                self._emit(t)
            body = json.dumps(payload(t, external_url=self._external_url)).encode()
            for notifier in self.notifiers:
                notifier.submit(body)
        return transitions

    def active(self) -> list[dict[str, Any]]:
        """The pending and firing alerts, as ``GET /v1/alerts`` returns them."""
        return [_describe(a) for a in self._book.active()]

    async def drain(self) -> None:
        """Wait until every queued notification is delivered or dropped."""
        for notifier in self.notifiers:
            await notifier.drain()

    async def run_forever(self) -> None:
        """Evaluate every ``evaluate_every_s`` until cancelled; an evaluation error is logged, not fatal."""
        while True:
            try:
                await self.evaluate()
            except Exception:
                log.exception("alert evaluation failed")
            await self._sleep(self._settings.evaluate_every_s)

    async def close(self) -> None:
        """Stop delivery and close the default HTTP session."""
        for notifier in self.notifiers:
            await notifier.close()
        if self._own_post is not None:
            await self._own_post.close()

    def _emit(self, t: Transition) -> None:
        a = t.alert
        self._events += 1
        firing = t.action == "firing"
        where = f" on {a.instance} ({a.kind})" if a.instance else ""
        event = RouterEvent(
            event_id=f"alert-{a.fingerprint}-{t.action}-{self._events}",
            ts=t.at,
            kind="alert",
            severity=EVENT_SEVERITY[a.rule.severity] if firing else "info",
            instance=a.instance or None,
            model=a.model or None,
            message=f"{t.action}: {a.rule.name}{where}: {a.rule.summary or a.rule.name}"[:2000],
            value=a.value,
        )
        try:
            self._on_event(event)
        except Exception:
            log.exception("on_event failed for %s", event.event_id)


def _describe(a: Alert) -> dict[str, Any]:
    since = a.fired_at if a.state == "firing" and a.fired_at is not None else a.active_since
    return {"name": a.rule.name, "severity": a.rule.severity, "state": a.state, "instance": a.instance or None,
            "model": a.model or None, "kind": a.kind, "since": since.isoformat(), "value": a.value,
            "summary": a.rule.summary or a.rule.name, "description": a.description(), "labels": a.labels(),
            "fingerprint": a.fingerprint}
