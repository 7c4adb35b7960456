"""Alert notifications in Alertmanager's webhook format, delivered with retries and backoff.

:func:`payload` builds the body Alertmanager's ``webhook_config`` posts (version "4", one alert
per notification, grouped by alertname, instance and kind), so an Alertmanager, Slack or
PagerDuty bridge takes it unchanged. A :class:`WebhookNotifier` owns one receiver: a queue and a
worker task, so evaluation never waits on delivery; each body is retried with exponential backoff
until a 2xx (delivered once), a 4xx other than 408/429 (the receiver refuses it), or
``max_attempts``. Order is kept per receiver (a resolve never overtakes its firing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import aiohttp

from probes.alerts.rules import Transition
from schemas.config.probes import AlertWebhook

__all__ = ["AiohttpPost", "Post", "WebhookNotifier", "payload"]

log = logging.getLogger(__name__)

Post = Callable[[str, bytes, dict[str, str], float], Awaitable[int]]
ZERO_TIME = "0001-01-01T00:00:00Z"
RECEIVER = "routelens"
MAX_QUEUED = 1000


def _rfc3339(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")


def payload(t: Transition, *, external_url: str = "", receiver: str = RECEIVER) -> dict[str, Any]:
    """The Alertmanager webhook body for one transition (a repeat is sent as ``firing``)."""
    a = t.alert
    status = "resolved" if t.action == "resolved" else "firing"
    labels = a.labels()
    annotations = {"summary": a.rule.summary or a.rule.name, "description": a.description()}
    group = {k: labels[k] for k in ("alertname", "instance", "kind") if k in labels}
    group_key = "{}:{" + ", ".join(f'{k}="{v}"' for k, v in group.items()) + "}"
    alert = {
        "status": status,
        "labels": labels,
        "annotations": annotations,
        "startsAt": _rfc3339(a.fired_at or a.active_since),
        "endsAt": _rfc3339(t.at) if status == "resolved" else ZERO_TIME,
        "generatorURL": f"{external_url.rstrip('/')}/v1/alerts",
        "fingerprint": a.fingerprint,
    }
    return {"version": "4", "groupKey": group_key, "truncatedAlerts": 0, "status": status,
            "receiver": receiver, "groupLabels": group, "commonLabels": labels,
            "commonAnnotations": annotations, "externalURL": external_url, "alerts": [alert]}


class AiohttpPost:
    """The default :data:`Post`: one aiohttp session, opened on first use."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def __call__(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        """POST ``body`` and return the HTTP status (connection errors raise)."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        async with self._session.post(url, data=body, headers=headers, timeout=timeout) as resp:
            await resp.read()
            return resp.status

    async def close(self) -> None:
        """Close the session."""
        if self._session is not None:
            await self._session.close()
            self._session = None


class WebhookNotifier:
    """Delivers bodies to one webhook, in order, retried with exponential backoff.

    Args:
        webhook: The receiver and its retry bounds.
        post: The HTTP POST (injectable).
        sleep: Awaitable sleep for the backoff.
    """

    def __init__(self, webhook: AlertWebhook, post: Post, *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.webhook = webhook
        self._post, self._sleep = post, sleep
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=MAX_QUEUED)
        self._worker: asyncio.Task[None] | None = None
        self.delivered = 0
        self.dropped = 0
        self.attempts = 0

    def submit(self, body: bytes) -> None:
        """Queue one notification (call from the event loop); returns at once.

        A receiver down for long must not grow memory without bound: past ``MAX_QUEUED`` waiting
        notifications a new one is dropped (logged and counted in ``dropped``).
        """
        try:
            self._queue.put_nowait(body)
        except asyncio.QueueFull:
            self.dropped += 1
            log.error("alert webhook %s: %d notifications waiting; a new one is dropped", self.webhook.url,
                      self._queue.qsize())
            return
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work())

    async def drain(self) -> None:
        """Wait until every queued notification is delivered or dropped."""
        await self._queue.join()

    async def close(self) -> None:
        """Stop the worker (notifications still queued are dropped)."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "User-Agent": "RouteLens-Alerts"}
        token = os.environ.get(self.webhook.bearer_token_env) if self.webhook.bearer_token_env else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    async def _work(self) -> None:
        while True:
            body = await self._queue.get()
            try:
                await self._deliver(body)
            finally:
                self._queue.task_done()

    async def _deliver(self, body: bytes) -> bool:
        w = self.webhook
        delay = w.backoff_s
        for attempt in range(1, w.max_attempts + 1):
            self.attempts += 1
            status: int | None = None
            try:
                status = await self._post(w.url, body, self._headers(), w.timeout_s)
            except Exception as exc:  # any failure to deliver is retried, never kills the worker
                log.warning("alert webhook %s attempt %d failed: %r", w.url, attempt, exc)
            if status is not None and 200 <= status < 300:
                self.delivered += 1
                return True
            if status is not None and 400 <= status < 500 and status not in (408, 429):
                log.error("alert webhook %s refused a notification with HTTP %d; dropped", w.url, status)
                break
            if attempt < w.max_attempts:
                await self._sleep(delay)
                delay = min(delay * 2, w.max_backoff_s)
        else:
            log.error("alert webhook %s: %d attempts failed; notification dropped", w.url, w.max_attempts)
        self.dropped += 1
        return False
