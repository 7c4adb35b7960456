"""Forwarding one request to the decided instances, trying the next one when an attempt fails.

The forwarder returns its attempts as values; the recorder turns them into trace steps.

Upstream bodies are passed through as bytes; only ``usage`` is read from a successful JSON
response, for the trace's token counts and cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from router_core.state import StateView
from schemas.common import AttemptStatus
from schemas.fleet import InstanceSpec
from schemas.trace import Attempt

__all__ = ["Forwarded", "Forwarder", "pipe_stream", "usage_of"]

_RETRYABLE = {429, 500, 502, 503, 504}


@dataclass(slots=True)
class Forwarded:
    """Every attempt made, and what the upstream that answered gave back (None when every attempt failed)."""

    attempts: list[Attempt]
    spec: InstanceSpec | None = None
    response: aiohttp.ClientResponse | None = None
    body: bytes = b""
    last_error: str | None = None


class Forwarder:
    """Sends the request to instances in ranked order, recording each attempt.

    Args:
        session: The gateway's one pooled client.
        view: Receives each attempt's success or failure.
        timeout: Per-attempt connect and total timeouts.
        perf: Monotonic clock (injected).
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        view: StateView,
        timeout: aiohttp.ClientTimeout,
        *,
        perf: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._session = session
        self._view = view
        self._timeout = timeout
        self._perf = perf

    async def forward(
        self, body: dict[str, Any], targets: Sequence[InstanceSpec], request_id: str, max_attempts: int
    ) -> Forwarded:
        """Try ``targets`` in order until one answers; a streaming response is returned unread."""
        attempts: list[Attempt] = []
        last_error: str | None = None
        for spec in targets[:max_attempts]:
            body["model"] = spec.model
            started = self._perf()
            status, http_status, error, payload = AttemptStatus.OK, None, None, b""
            try:
                resp = await self._session.post(
                    f"{spec.url}/v1/chat/completions",
                    data=orjson.dumps(body),
                    headers={"Content-Type": "application/json", "X-Request-Id": request_id},
                    timeout=self._timeout,
                )
                http_status = resp.status
                if resp.status in _RETRYABLE:
                    await resp.read()
                    resp.release()
                    status, error = AttemptStatus.HTTP_ERROR, f"HTTP {resp.status}"
                elif not body.get("stream"):
                    payload = await resp.read()
            except TimeoutError:
                status, error = AttemptStatus.TIMEOUT, "timeout"
            except aiohttp.ClientError as exc:
                status, error = AttemptStatus.CONNECT_ERROR, type(exc).__name__
            ok = status is AttemptStatus.OK
            attempt = Attempt(seq=len(attempts), instance=spec.id, model=spec.model, status=status,
                              http_status=http_status, error_class=error, latency_ms=(self._perf() - started) * 1e3)
            attempts.append(attempt)
            self._view.observe(spec.id, attempt.latency_ms, ok and (http_status or 0) < 500)
            if ok:
                return Forwarded(attempts, spec, resp, payload)
            last_error = error
        return Forwarded(attempts, last_error=last_error)


def usage_of(body: bytes) -> dict[str, Any]:
    """Return the ``usage`` object of an OpenAI JSON response, or {} when absent or unparseable."""
    try:
        usage = orjson.loads(body).get("usage")
    except (orjson.JSONDecodeError, AttributeError):
        return {}
    return usage if isinstance(usage, dict) else {}


async def pipe_stream(resp: aiohttp.ClientResponse, out: web.StreamResponse) -> tuple[float | None, str | None]:
    """Copy an SSE stream to the client.

    Returns:
        Milliseconds from the start of the copy to the first chunk (None if none came), and the
        error class when the stream broke off (upstream gone or client gone), else None.
    """
    start = time.perf_counter()
    first: float | None = None
    error: str | None = None
    try:
        async for chunk in resp.content.iter_any():
            if first is None:
                first = (time.perf_counter() - start) * 1e3
            await out.write(chunk)
    except (TimeoutError, aiohttp.ClientError, ConnectionResetError) as exc:
        error = f"stream_interrupted:{type(exc).__name__}"
    finally:
        resp.release()
    return first, error
