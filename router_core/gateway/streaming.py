"""Relaying an upstream's SSE stream to the client once its first chunk has arrived.

The forwarder reads the first chunk (a failure before it is a failed attempt and the next instance
is tried); from then on the client has the stream, and a failure ends it with an OpenAI-shaped
error event (``data: {"error": {...}}``) and an error outcome. Between chunks the upstream may
pause at most ``idle_timeout_s``; there is no total: a long generation is not cut off.

Usage: the gateway asks the upstream for it (``stream_options.include_usage``) and reads the
usage-only chunk (``choices: []`` with ``usage``); that chunk is dropped from what the client
receives unless the client asked for it too.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from router_core.gateway.encoding import Decoder
from router_core.gateway.http1 import UpstreamError, UpstreamResponse

__all__ = ["SseUsage", "StreamEnd", "ask_for_usage", "error_event", "relay_stream"]

_EVENT_END = re.compile(rb"\r?\n\r?\n")
# A stream that never separates its events (not SSE after all) is sent on as it comes beyond this.
_MAX_PENDING = 1 << 20


def ask_for_usage(body: dict[str, Any]) -> bool:
    """Set ``stream_options.include_usage`` on a stream request; return whether the client had set it."""
    options = body.get("stream_options")
    options = dict(options) if isinstance(options, dict) else {}
    asked = options.get("include_usage") is True  # the contract lets only a boolean through
    body["stream_options"] = options | {"include_usage": True}
    return asked


def error_event(message: str, code: str) -> bytes:
    """An SSE event carrying an OpenAI error object."""
    err = {"error": {"message": message, "type": "upstream_error", "param": None, "code": code}}
    return b"data: " + orjson.dumps(err) + b"\n\n"


class SseUsage:
    """Splits SSE bytes into whole events, reads ``usage``, and drops the usage-only chunk if asked.

    Args:
        strip_usage: Drop the usage-only chunk (the client did not ask for it).
    """

    def __init__(self, *, strip_usage: bool) -> None:
        self.strip_usage = strip_usage
        self.usage: dict[str, Any] = {}
        self._buf = bytearray()

    def feed(self, data: bytes) -> bytes:
        """Take the next bytes; return the whole events to send on (a partial one waits for its end)."""
        self._buf += data
        out = bytearray()
        pos = 0
        while (m := _EVENT_END.search(self._buf, pos)) is not None:
            event = bytes(self._buf[pos:m.end()])
            pos = m.end()
            if self._keep(event):
                out += event
        del self._buf[:pos]
        if len(self._buf) > _MAX_PENDING:
            out += self._buf
            self._buf.clear()
        return bytes(out)

    def flush(self) -> bytes:
        """The bytes left after the last event separator (an unterminated last event)."""
        rest, self._buf = bytes(self._buf), bytearray()
        return rest if not rest or self._keep(rest) else b""

    def _keep(self, event: bytes) -> bool:
        if b'"usage"' not in event:
            return True
        data = b"\n".join(line[5:].lstrip(b" ") for line in event.splitlines() if line.startswith(b"data:"))
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return True
        if not isinstance(chunk, dict) or not isinstance(chunk.get("usage"), dict):
            return True
        self.usage = chunk["usage"]
        return not (self.strip_usage and chunk.get("choices") == [])


@dataclass(slots=True)
class StreamEnd:
    """How a relayed stream ended: the usage read, and the error class when it broke off."""

    usage: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class _ClientGone(Exception):
    """The client went away while the stream was written (nothing more to send it)."""


async def _send(out: web.StreamResponse, data: bytes) -> None:
    if not data:
        return
    try:
        await out.write(data)
    except (ConnectionError, aiohttp.ClientConnectionError) as exc:
        raise _ClientGone from exc


async def relay_stream(
    first: bytes,
    resp: UpstreamResponse,
    out: web.StreamResponse,
    *,
    idle_timeout_s: float,
    strip_usage: bool,
    decoder: Decoder | None = None,
) -> StreamEnd:
    """Send ``first`` and the rest of ``resp`` to the prepared ``out``, then end ``out``.

    Args:
        first: The first chunk, already read by the forwarder.
        resp: The upstream response (released here).
        out: The client's response, prepared.
        idle_timeout_s: Longest wait for the next chunk.
        strip_usage: Drop the usage-only chunk from what the client gets.
        decoder: Decodes a compressed upstream stream (the client gets identity).
    """
    sse = SseUsage(strip_usage=strip_usage)
    end = StreamEnd()
    complete = False
    try:
        chunk = first
        while chunk:
            await _send(out, sse.feed(decoder.feed(chunk) if decoder else chunk))
            try:
                async with asyncio.timeout(idle_timeout_s):  # no task per chunk, as wait_for makes
                    chunk = await resp.content.readany()
            except TimeoutError:
                end.error = "stream_interrupted:idle_timeout"
            except UpstreamError as exc:
                end.error = f"stream_interrupted:{type(exc).__name__}"
            if end.error is not None:
                await _send(out, sse.flush())
                await _send(out, error_event(f"the upstream stream broke off ({end.error})", "stream_interrupted"))
                break
        else:
            await _send(out, sse.feed(decoder.flush()) if decoder else b"")
            await _send(out, sse.flush())
            complete = True
        await out.write_eof()
    except zlib.error:
        end.error = "stream_interrupted:bad_encoding"
        await _finish_quietly(out, error_event("the upstream sent a corrupt compressed stream", "stream_interrupted"))
    except (_ClientGone, ConnectionError, aiohttp.ClientConnectionError):
        end.error = "stream_interrupted:client_disconnected"
    finally:
        if complete:
            resp.release()
        else:
            resp.close()  # broken off or cancelled: the connection does not go back into the pool
    end.usage = sse.usage
    return end


async def _finish_quietly(out: web.StreamResponse, data: bytes) -> None:
    try:
        await out.write(data)
        await out.write_eof()
    except (ConnectionError, aiohttp.ClientConnectionError):
        pass  # the client is gone too: the outcome already says the stream broke off
