"""Forwarding one request to the ranked instances, trying the next one when an attempt fails.

Upstream bodies are passed through as bytes; only ``usage`` is read from a successful JSON
response, for the trace's token counts and cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from router_core.recorder import TraceRecorder
from router_core.state import StateView
from schemas.common import AttemptStatus, StepKind
from schemas.fleet import InstanceSpec
from schemas.trace import Attempt

__all__ = ["Forwarded", "Forwarder", "pipe_stream", "usage_of"]

_RETRYABLE = {429, 500, 502, 503, 504}


@dataclass(slots=True)
class Forwarded:
    """What an upstream gave back (or None when every attempt failed)."""

    spec: InstanceSpec | None
    response: aiohttp.ClientResponse | None
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
        self, body: dict[str, Any], ranked: list[InstanceSpec], rec: TraceRecorder, max_attempts: int
    ) -> Forwarded:
        """Try ``ranked`` instances in order; a streaming response is returned unread."""
        last_error: str | None = None
        for spec in ranked[:max_attempts]:
            if rec.attempts:
                rec.fallback(f"attempt on {rec.attempts[-1].instance} failed: {last_error}")
                rec.step("fallback", StepKind.FALLBACK, reason=f"retrying on {spec.id}", instances=[spec.id])
            body["model"] = spec.model
            started = self._perf()
            status, http_status, error, payload = AttemptStatus.OK, None, None, b""
            try:
                resp = await self._session.post(
                    f"{spec.url}/v1/chat/completions",
                    data=orjson.dumps(body),
                    headers={"Content-Type": "application/json", "X-Request-Id": rec.request_id},
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
            rec.attempts.append(
                Attempt(
                    seq=len(rec.attempts),
                    instance=spec.id,
                    model=spec.model,
                    status=status,
                    http_status=http_status,
                    error_class=error,
                    latency_ms=(self._perf() - started) * 1e3,
                )
            )
            rec.step(
                f"attempt/{spec.id}",
                StepKind.ATTEMPT,
                value=float(http_status) if http_status else None,
                reason="ok" if ok else error or "",
                instances=[spec.id],
            )
            self._view.observe(spec.id, rec.attempts[-1].latency_ms, ok and (http_status or 0) < 500)
            if ok:
                rec.selected = (spec.model, spec.id)
                return Forwarded(spec, resp, payload)
            last_error = error
        return Forwarded(None, None, last_error=last_error)


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
