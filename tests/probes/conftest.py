"""Fixtures for the probe tests: loopback servers, simulated instances and one shared embedder."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from probes.embedder import MiniLMEmbedder
from schemas.config.probes import ProbeSettings
from schemas.config.sim import SimModelProfile, SimSettings
from schemas.fleet import InstanceSpec

Serve = Callable[[web.Application], AbstractAsyncContextManager[str]]
MODEL = "sim-model"


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port; yield its base URL."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def completion(content: Any = "Hello! How can I help?", **message: Any) -> dict[str, Any]:
    """A valid CreateChatCompletionResponse with ``content`` (message fields overridable)."""
    msg = {"role": "assistant", "content": content, "refusal": None, **message}
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
            "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 5, "total_tokens": 7}}


def fixed_app(body: bytes | dict[str, Any], status: int = 200, content_type: str = "application/json",
              seen: list[dict[str, str]] | None = None) -> web.Application:
    """An instance that answers every chat request with ``body``; request headers go to ``seen``."""
    raw = json.dumps(body).encode() if isinstance(body, dict) else body

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        if seen is not None:
            seen.append(dict(request.headers))
        return web.Response(body=raw, status=status, content_type=content_type)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def streaming_app(total: int, chunk: int = 1 << 20, *, content_length: bool = False, every_s: float = 0.0,
                  fill: bytes = b"x") -> web.Application:
    """An instance that streams ``total`` bytes of ``fill`` in ``chunk``-byte writes, ``every_s`` apart.

    Big and fast it is a huge answer (``content_length`` declares it up front); small and slow a drip.
    """
    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        if content_length:
            resp.content_length = total
        await resp.prepare(request)
        block = fill * chunk
        try:
            for _ in range(total // chunk):
                await resp.write(block)
                if every_s:
                    await asyncio.sleep(every_s)
        except (ConnectionResetError, RuntimeError):
            pass  # the probe hung up at its cap or its timeout
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def sim_app(instance_id: str = "sim-a", *, seed: int = 5, zero_delay: bool = True, **kwargs: Any) -> web.Application:
    """A simulated instance (``sim.server``) serving ``sim-model``."""
    from sim.server import build_instance_app

    spec = InstanceSpec(id=instance_id, model=MODEL, url="http://127.0.0.1:0", context_window=4096)
    settings = SimSettings(zero_delay=zero_delay, seed=seed, warm_start=True)
    return build_instance_app(spec, SimModelProfile(), settings, **kwargs)


def fast_settings(**update: Any) -> ProbeSettings:
    """Probe settings with a short timeout."""
    return ProbeSettings(timeout_s=2.0).model_copy(update=update)


@pytest.fixture(scope="session")
def embedder() -> Iterator[MiniLMEmbedder]:
    """One MiniLM embedder for the whole run (it loads in a few seconds)."""
    yield MiniLMEmbedder()
