"""One probe request straight to an instance: capped reads, one overall timeout, no exceptions.

A probe must never hang or balloon: the whole exchange (connect to last byte) shares one timeout,
so a server dripping a byte a second is a ``timeout``; the body is read in chunks and cut at
``max_bytes`` (``too_large``), never buffered whole. Network trouble comes back as data
(:class:`ChatCall` with ``error_class``), so the caller decides what it means.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from probes.types import Target

__all__ = ["ChatCall", "call_chat", "fetch"]

_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class ChatCall:
    """What one probe request got back.

    Attributes:
        status: The HTTP status, or None when no response head arrived.
        body: The raw body, or None when it was not read in full (error, too large).
        elapsed_ms: Wall time from sending to the last byte (or to the failure).
        error_class: ``timeout``, ``connect``, ``too_large``, ``disconnected``, ``http`` or None.
        error: The failure in words (empty without one).
    """

    status: int | None
    body: bytes | None
    elapsed_ms: float
    error_class: str | None = None
    error: str = ""


async def fetch(session: aiohttp.ClientSession, method: str, url: str, *, timeout_s: float, max_bytes: int,
                headers: dict[str, str] | None = None, data: bytes | None = None,
                perf: Callable[[], float] = time.perf_counter) -> ChatCall:
    """Send one request and read its answer under one timeout and a byte cap; never raise for network trouble."""
    start = perf()

    def done(status: int | None, body: bytes | None, error_class: str | None = None, error: str = "") -> ChatCall:
        return ChatCall(status, body, max(0.0, (perf() - start) * 1000.0), error_class, error)

    status: int | None = None
    try:
        async with asyncio.timeout(timeout_s):
            async with session.request(method, url, headers=headers, data=data) as resp:
                status = resp.status
                if resp.content_length is not None and resp.content_length > max_bytes:
                    resp.close()
                    return done(status, None, "too_large",
                                f"answer of {resp.content_length} bytes exceeds the {max_bytes}-byte cap")
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.content.iter_chunked(_CHUNK):
                    size += len(chunk)
                    if size > max_bytes:
                        resp.close()
                        return done(status, None, "too_large", f"answer cut at the {max_bytes}-byte cap")
                    chunks.append(chunk)
                return done(status, b"".join(chunks))
    except TimeoutError:
        what = "no answer" if status is None else f"answer (HTTP {status}) not complete"
        return done(status, None, "timeout", f"{what} within {timeout_s:g} s")
    except aiohttp.ClientConnectorError as exc:
        return done(None, None, "connect", f"cannot connect: {exc.os_error or exc}")
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError) as exc:
        return done(status, None, "disconnected", f"connection broken: {exc or type(exc).__name__}")
    except aiohttp.ClientError as exc:
        return done(status, None, "http", f"{type(exc).__name__}: {exc}")


async def call_chat(session: aiohttp.ClientSession, target: Target, body: dict[str, Any], *, timeout_s: float,
                    max_bytes: int, marker_header: str, perf: Callable[[], float] = time.perf_counter) -> ChatCall:
    """``POST {target.url}/v1/chat/completions`` with the probe marker (and the instance's key, if any).

    Args:
        session: The prober's HTTP session.
        target: The instance.
        body: The chat-completions request body.
        timeout_s: Connect to last byte.
        max_bytes: Longest answer read; a longer one is cut and reported as ``too_large``.
        marker_header: Header sent with value ``"1"`` so the instance's traffic is known as a probe.
        perf: Monotonic seconds (injected in tests).

    Returns:
        The :class:`ChatCall`; network problems are in ``error_class``, never raised.
    """
    headers = {marker_header: "1", "Content-Type": "application/json"}
    if target.api_key:
        headers["Authorization"] = f"Bearer {target.api_key}"
    return await fetch(session, "POST", f"{target.url.rstrip('/')}/v1/chat/completions", timeout_s=timeout_s,
                       max_bytes=max_bytes, headers=headers, data=orjson.dumps(body), perf=perf)
