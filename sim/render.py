"""Writing a chat answer: one JSON body or SSE chunks, intact or garbled (the garbage fault).

Garbage is what a broken server or tokenizer sends: a JSON body cut off half-way, or text decoded
with the wrong charset (mojibake) inside a well-formed body.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from sim.openai_api import json_response

__all__ = ["Garble", "mojibake", "pick_garble", "render_json", "stream_sse"]

Garble = str | None  # None: intact; "cut": invalid JSON; "mojibake": wrong charset


def mojibake(text: str) -> str:
    """Return ``text`` as UTF-8 bytes read back as Latin-1, every third character lost (U+FFFD)."""
    misread = text.encode("utf-8").decode("latin-1")
    return "".join("\ufffd" if i % 3 == 2 else ch for i, ch in enumerate(misread))


def pick_garble(rng: random.Random) -> Garble:
    """Choose how a garbage answer is broken."""
    return "cut" if rng.random() < 0.5 else "mojibake"


def render_json(payload: dict[str, object], headers: dict[str, str], garble: Garble) -> web.Response:
    """A JSON chat completion; ``garble`` corrupts it."""
    if garble == "cut":
        raw = orjson.dumps(payload)
        return web.Response(body=raw[: len(raw) // 2], content_type="application/json", headers=headers)
    if garble == "mojibake":
        choices = payload["choices"]
        assert isinstance(choices, list)
        message = choices[0]["message"]
        message["content"] = mojibake(message["content"])
    return json_response(payload, headers=headers)


async def stream_sse(request: web.Request, headers: dict[str, str], envelope: dict[str, object],
                     pieces: tuple[tuple[str, int], ...], finish: str, usage: dict[str, int] | None,
                     pause: Callable[[int], Awaitable[None]], garble: Garble) -> tuple[web.StreamResponse, str]:
    """Send SSE chunks, pausing ``pause(tokens)`` before each piece.

    Returns:
        The response and the finish reason (``abort`` when the client went away).
    """
    response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    await response.prepare(request)

    async def send(chunk: dict[str, object]) -> None:
        await response.write(b"data: " + orjson.dumps({**envelope, **chunk}) + b"\n\n")

    def choice(delta: dict[str, str], reason: str | None = None) -> dict[str, object]:
        return {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]}

    try:
        await send(choice({"role": "assistant", "content": ""}))
        for i, (piece, tokens) in enumerate(pieces):
            await pause(tokens)
            if garble == "cut" and i == len(pieces) // 2:
                await response.write(b'data: {"id": "' + piece.encode() + b"\n\n")
            await send(choice({"content": mojibake(piece) if garble == "mojibake" else piece}))
        await send(choice({}, finish))
        if usage is not None:
            await send({"choices": [], "usage": usage})
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except ConnectionResetError:
        return response, "abort"
    return response, finish
