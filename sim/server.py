"""One simulated vLLM-like instance: the OpenAI chat API, ``/metrics`` and admin overrides.

Request checks live in :func:`parse_chat_request`, occupancy and service time in :class:`SimEngine`,
gauges in :mod:`sim.exposition` and answers in :mod:`sim.corpus`; :class:`SimInstance` wires them
to HTTP handlers.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import orjson
from aiohttp import web
from pydantic import ValidationError

from schemas.config import SimModelProfile, SimSettings
from schemas.fleet import InstanceSpec
from sim.corpus import compose_answer
from sim.exposition import CONTENT_TYPE, InstanceMetrics, Overrides
from sim.openai_api import ApiError, json_response, parse_chat_request

__all__ = ["INSTANCE_KEY", "SimEngine", "SimInstance", "build_instance_app"]

Clock = Callable[[], float]


class SimEngine:
    """Admission, occupancy and service time of one instance (the parts a scheduler sees).

    Args:
        profile: Model behaviour: latency terms, slots and KV capacity.
        settings: Simulator knobs: ``time_scale`` and ``zero_delay``.
    """

    def __init__(self, profile: SimModelProfile, settings: SimSettings) -> None:
        self.profile = profile
        self.settings = settings
        self.waiting = 0
        self.running = 0
        self.kv_held = 0
        self._slots = asyncio.Semaphore(profile.max_concurrency)

    @property
    def kv_usage(self) -> float:
        """Share of the KV cache held by running requests, clamped to [0, 1]."""
        return min(1.0, max(0.0, self.kv_held / self.profile.kv_tokens))

    @asynccontextmanager
    async def admit(self, tokens: int) -> AsyncIterator[None]:
        """Wait for a slot, then hold it and ``tokens`` of KV cache until the block exits."""
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        self.kv_held += tokens
        try:
            yield
        finally:
            self.running -= 1
            self.kv_held -= tokens
            self._slots.release()

    def prefill_s(self, prompt_tokens: int) -> float:
        """Seconds until the first token: base latency plus prefill, scaled."""
        p = self.profile
        return (p.base_latency_ms / 1000 + prompt_tokens / p.prefill_tps) / self.settings.time_scale

    def decode_s(self, completion_tokens: int) -> float:
        """Seconds to generate ``completion_tokens``, scaled."""
        return completion_tokens / self.profile.decode_tps / self.settings.time_scale

    async def pause(self, seconds: float) -> None:
        """Sleep for ``seconds`` unless the simulator runs with ``zero_delay``."""
        if not self.settings.zero_delay and seconds > 0:
            await asyncio.sleep(seconds)


class SimInstance:
    """The HTTP face of one simulated instance.

    Args:
        spec: The instance as the fleet declares it.
        profile: Model behaviour.
        settings: Simulator knobs; ``seed`` makes answers deterministic.
        clock: Monotonic seconds, used for latency observations.
        rng: Source of completion ids; seeded from ``settings.seed`` and the instance id by default.
    """

    def __init__(self, spec: InstanceSpec, profile: SimModelProfile, settings: SimSettings,
                 clock: Clock = time.monotonic, rng: random.Random | None = None) -> None:
        self.spec = spec
        self.settings = settings
        self.clock = clock
        self.rng = rng if rng is not None else random.Random(f"{settings.seed}\x1f{spec.id}")
        self.engine = SimEngine(profile, settings)
        self.metrics = InstanceMetrics(spec.model, self.engine)

    def _envelope(self, obj: str) -> dict[str, object]:
        return {"id": f"chatcmpl-{self.rng.getrandbits(96):024x}", "object": obj,
                "created": int(time.time()), "model": self.spec.model}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``: a JSON answer, or SSE chunks when ``stream`` is true."""
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return ApiError("We could not parse the JSON body of your request.", None, "invalid_json").response()
        parsed = parse_chat_request(body, self.spec.context_window)
        if isinstance(parsed, ApiError):
            return parsed.response()
        room = self.spec.context_window - parsed.prompt_tokens
        limit = room if parsed.max_tokens is None else min(parsed.max_tokens, room)
        answer_rng = random.Random(f"{self.settings.seed}\x1f{self.spec.id}\x1f{parsed.key}")
        answer = compose_answer(parsed.topic, answer_rng, limit)
        finish: str = answer.finish_reason
        usage = {"prompt_tokens": parsed.prompt_tokens, "completion_tokens": answer.tokens,
                 "total_tokens": parsed.prompt_tokens + answer.tokens}
        envelope = self._envelope("chat.completion.chunk" if parsed.stream else "chat.completion")
        headers = {"x-request-id": request.headers.get("x-request-id") or str(envelope["id"])}
        started = self.clock()
        async with self.engine.admit(parsed.prompt_tokens + answer.tokens):
            await self.engine.pause(self.engine.prefill_s(parsed.prompt_tokens))
            ttft = self.clock() - started
            if parsed.stream:
                response, finish = await self._stream(request, headers, envelope, answer.pieces, finish,
                                                      usage if parsed.include_usage else None)
            else:
                await self.engine.pause(self.engine.decode_s(answer.tokens))
                message = {"role": "assistant", "content": answer.text, "refusal": None}
                choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                response = json_response({**envelope, "choices": [choice], "usage": usage}, headers=headers)
        self.metrics.record_finished(finish, parsed.prompt_tokens, answer.tokens, self.clock() - started, ttft)
        return response

    async def _stream(self, request: web.Request, headers: dict[str, str], envelope: dict[str, object],
                      pieces: tuple[tuple[str, int], ...], finish: str,
                      usage: dict[str, int] | None) -> tuple[web.StreamResponse, str]:
        """Send SSE chunks; return the response and the finish reason (``abort`` if the client left)."""
        response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)

        async def send(chunk: dict[str, object]) -> None:
            await response.write(b"data: " + orjson.dumps({**envelope, **chunk}) + b"\n\n")

        def choice(delta: dict[str, str], reason: str | None = None) -> dict[str, object]:
            return {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]}

        try:
            await send(choice({"role": "assistant", "content": ""}))
            for piece, tokens in pieces:
                await self.engine.pause(self.engine.decode_s(tokens))
                await send(choice({"content": piece}))
            await send(choice({}, finish))
            if usage is not None:
                await send({"choices": [], "usage": usage})
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:
            return response, "abort"
        return response, finish

    async def models(self, request: web.Request) -> web.Response:
        """``GET /v1/models``: the one model this instance serves."""
        card = {"id": self.spec.model, "object": "model", "created": int(time.time()),
                "owned_by": "routelens-sim", "max_model_len": self.spec.context_window}
        return json_response({"object": "list", "data": [card]})

    async def health(self, request: web.Request) -> web.Response:
        """``GET /health``: always healthy until fault injection says otherwise."""
        return json_response({"status": "ok"})

    async def metrics_text(self, request: web.Request) -> web.Response:
        """``GET /metrics``: Prometheus text with vLLM's names."""
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def get_overrides(self, request: web.Request) -> web.Response:
        """``GET /admin/overrides``: the forced gauge values (null: live)."""
        return json_response(self.metrics.overrides.model_dump())

    async def post_overrides(self, request: web.Request) -> web.Response:
        """``POST /admin/overrides``: merge keys given (null clears one); answer the new overrides."""
        try:
            patch = Overrides.model_validate_json(await request.read())
        except ValidationError as exc:
            first = exc.errors()[0]
            param = ".".join(str(part) for part in first["loc"]) or None
            return ApiError(f"invalid overrides: {first['msg']}", param, "invalid_value").response()
        self.metrics.overrides = self.metrics.overrides.merge(patch)
        return await self.get_overrides(request)


INSTANCE_KEY = web.AppKey("sim_instance", SimInstance)


def build_instance_app(spec: InstanceSpec, profile: SimModelProfile, settings: SimSettings, *,
                       clock: Clock = time.monotonic, rng: random.Random | None = None) -> web.Application:
    """Build the aiohttp application of one simulated instance.

    Args:
        spec: The instance: id, served model, context window.
        profile: Model behaviour (latency terms, concurrency, KV capacity).
        settings: Simulator knobs (time scale, zero delay, seed).
        clock: Monotonic seconds for latency observations.
        rng: Source of completion ids; seeded from the settings and instance id when omitted.

    Returns:
        The application; ``app[INSTANCE_KEY]`` is its :class:`SimInstance`.
    """
    instance = SimInstance(spec, profile, settings, clock, rng)
    app = web.Application()
    app[INSTANCE_KEY] = instance
    app.router.add_post("/v1/chat/completions", instance.chat)
    app.router.add_get("/v1/models", instance.models)
    app.router.add_get("/health", instance.health)
    app.router.add_get("/metrics", instance.metrics_text)
    app.router.add_get("/admin/overrides", instance.get_overrides)
    app.router.add_post("/admin/overrides", instance.post_overrides)
    return app
