"""One simulated vLLM-like instance: the OpenAI chat API, ``/metrics``, faults and admin endpoints.

Request checks live in :mod:`sim.openai_api`, occupancy and service time in :class:`SimEngine`,
faults in :class:`FaultBook`, gauges in :mod:`sim.exposition`, answers in :mod:`sim.corpus` and
their wire form in :mod:`sim.render`; :class:`SimInstance` wires them together, and
:mod:`sim.lifecycle` handles what faults do to the process (crash, hang, restart).
"""

from __future__ import annotations

import random

import orjson
from aiohttp import web

from schemas.config.sim import SimModelProfile, SimSettings
from schemas.fleet import InstanceSpec
from sim.admin import add_admin_routes
from sim.behaviour import p_correct
from sim.clock import Clock, RealClock
from sim.corpus import Verdict, classify, compose_answer, ground_truth
from sim.engine import SimEngine
from sim.exposition import CONTENT_TYPE
from sim.faults import FaultKind, FaultRecord
from sim.lifecycle import Lifecycle, LifecycleMixin, Listener
from sim.openai_api import ApiError, api_errors, json_response, parse_chat_request
from sim.render import Garble, pick_garble, render_json, stream_sse

__all__ = ["INSTANCE_KEY", "MAX_BODY_BYTES", "SimEngine", "SimInstance", "build_instance_app"]

# vLLM sets no body limit of its own. aiohttp's default (1 MiB) refused valid requests the gateway
# (32 MiB) forwards, as a 413 the trace blamed on the instance; twice the gateway's limit leaves room
# for what the gateway adds when it re-serialises a body (stream_options, a degraded step's changes).
MAX_BODY_BYTES = 64 << 20


class SimInstance(LifecycleMixin):
    """The HTTP face of one simulated instance.

    Args:
        spec: The instance as the fleet declares it.
        profile: Model behaviour.
        settings: Simulator knobs; ``seed`` makes answers and fault draws deterministic.
        clock: Wall clock for faults, warm-up and latencies (a VirtualClock in tests).
        rng: Source of completion ids and fault draws; seeded from the seed and instance id by default.
        lifecycle: Closes and reopens the port (crash, restart); None serves aborted connections instead.
        on_fault: Called with each fault start and end (the fleet's fault log).
    """

    def __init__(self, spec: InstanceSpec, profile: SimModelProfile, settings: SimSettings,
                 clock: Clock | None = None, rng: random.Random | None = None,
                 lifecycle: Lifecycle | None = None, on_fault: Listener | None = None) -> None:
        self.spec = spec
        self.settings = settings
        self.rng = rng if rng is not None else random.Random(f"{settings.seed}\x1f{spec.id}")
        self.setup_lifecycle(clock or RealClock(), lifecycle, on_fault)
        self.engine = SimEngine(profile, settings, self.clock, self.faults.slow_factor, self.faults.held_fraction)
        self.metrics = self.new_metrics()
        self.traceparents: dict[str, str] = {}  # x-request-id -> the traceparent it came with (the latest 1000)

    def _envelope(self, obj: str) -> dict[str, object]:
        return {"id": f"chatcmpl-{self.rng.getrandbits(96):024x}", "object": obj,
                "created": int(self.clock.epoch()), "model": self.spec.model}

    def _draw(self, kind: FaultKind) -> FaultRecord | None:
        """Return the fault to charge when a probabilistic fault of ``kind`` strikes this request."""
        p, record = self.faults.probability(kind)
        if record is None or self.rng.random() >= p:
            return None
        record.requests_affected += 1
        return record

    def _verdict(self, topic: str, answer_rng: random.Random) -> Verdict:
        if self._draw(FaultKind.DRIFT) is not None:
            return "drift"
        truth = ground_truth(topic)
        cls = truth.cls if truth is not None else classify(topic)
        p = p_correct(self.engine.profile, cls, topic, self.engine.warmup)
        return "correct" if answer_rng.random() < p else "wrong"

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``: a JSON answer, or SSE chunks when ``stream`` is true."""
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return ApiError("We could not parse the JSON body of your request.", None, "invalid_json").response()
        parsed = parse_chat_request(body, self.spec.context_window)
        if isinstance(parsed, ApiError):
            return parsed.response()
        limited = self._draw(FaultKind.RATELIMIT)
        if limited is not None:
            return ApiError("Rate limit reached for requests; retry after the given delay.", None,
                            "rate_limit_exceeded", status=429, type="rate_limit_error").response(
                headers={"Retry-After": str(limited.spec.retry_after_s)})
        if self._draw(FaultKind.ERROR) is not None:
            return ApiError("The engine failed while serving the request.", None, "engine_error", status=500,
                            type="server_error").response()
        room = self.spec.context_window - parsed.prompt_tokens
        limit = room if parsed.max_tokens is None else min(parsed.max_tokens, room)
        topic = parsed.topic
        answer_rng = random.Random(f"{self.settings.seed}\x1f{self.spec.id}\x1f{parsed.key}")
        answer = compose_answer(topic, answer_rng, limit, self._verdict(topic, answer_rng))
        garble: Garble = pick_garble(self.rng) if self._draw(FaultKind.GARBAGE) is not None else None
        finish: str = answer.finish_reason
        usage = {"prompt_tokens": parsed.prompt_tokens, "completion_tokens": answer.tokens,
                 "total_tokens": parsed.prompt_tokens + answer.tokens}
        envelope = self._envelope("chat.completion.chunk" if parsed.stream else "chat.completion")
        headers = {"x-request-id": request.headers.get("x-request-id") or str(envelope["id"])}
        if (traceparent := request.headers.get("traceparent")) is not None:
            if len(self.traceparents) >= 1000:
                del self.traceparents[next(iter(self.traceparents))]
            self.traceparents[headers["x-request-id"]] = traceparent
        engine, scale = self.engine, self.settings.time_scale
        arrived = self.clock.now()
        itl: list[float] = []
        decoded = [0.0]
        async with engine.admit(parsed.prompt_tokens + answer.tokens):
            prefill = engine.prefill_s(parsed.prompt_tokens)
            ttft = (self.clock.now() - arrived) * scale + prefill
            await engine.pause(prefill)
            if parsed.stream:
                async def pause(tokens: int) -> None:
                    seconds = engine.decode_s(tokens)
                    itl.append(seconds / max(tokens, 1))
                    decoded[0] += seconds
                    await engine.pause(seconds)

                response, finish = await stream_sse(request, headers, envelope, answer.pieces, finish,
                                                    usage if parsed.include_usage else None, pause, garble)
            else:
                decoded[0] = engine.decode_s(answer.tokens)
                itl.append(decoded[0] / max(answer.tokens, 1))
                await engine.pause(decoded[0])
                message = {"role": "assistant", "content": answer.text, "refusal": None}
                choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                response = render_json({**envelope, "choices": [choice], "usage": usage}, headers, garble)
        self.metrics.record_finished(finish, parsed.prompt_tokens, answer.tokens, ttft + decoded[0], ttft, tuple(itl))
        return response

    async def models(self, request: web.Request) -> web.Response:
        """``GET /v1/models``: the one model this instance serves."""
        card = {"id": self.spec.model, "object": "model", "created": int(self.clock.epoch()),
                "owned_by": "routelens-sim", "max_model_len": self.spec.context_window}
        return json_response({"object": "list", "data": [card]})

    async def health(self, request: web.Request) -> web.Response:
        """``GET /health``: healthy while the process is up (hang and crash act before this)."""
        return json_response({"status": "ok"})

    async def received_traceparents(self, request: web.Request) -> web.Response:
        """``GET /admin/traceparents``: the W3C ``traceparent`` each recent request came with, by request id."""
        return json_response(self.traceparents)

    async def metrics_text(self, request: web.Request) -> web.Response:
        """``GET /metrics``: Prometheus text with vLLM's names (frozen or lagging under freeze-metrics)."""
        return web.Response(body=self.scrape(), headers={"Content-Type": CONTENT_TYPE})


INSTANCE_KEY = web.AppKey("sim_instance", SimInstance)


def build_instance_app(spec: InstanceSpec, profile: SimModelProfile, settings: SimSettings, *,
                       clock: Clock | None = None, rng: random.Random | None = None,
                       lifecycle: Lifecycle | None = None, on_fault: Listener | None = None,
                       instance: SimInstance | None = None) -> web.Application:
    """Build the aiohttp application of one simulated instance.

    Args:
        spec: The instance: id, served model, context window.
        profile: Model behaviour (latency terms, concurrency, KV capacity, warm-up, accuracy).
        settings: Simulator knobs (time scale, zero delay, seed).
        clock: Wall clock; the machine's by default.
        rng: Source of completion ids and fault draws; seeded from the settings and instance id when omitted.
        lifecycle: Port control for crash and restart (the fleet passes one).
        on_fault: Listener for fault starts and ends.
        instance: Reuse this instance (a new application after a crash keeps the instance's state).

    Returns:
        The application; ``app[INSTANCE_KEY]`` is its :class:`SimInstance`.
    """
    inst = instance or SimInstance(spec, profile, settings, clock, rng, lifecycle, on_fault)
    app = web.Application(middlewares=[api_errors, inst.fault_middleware], client_max_size=MAX_BODY_BYTES)
    app[INSTANCE_KEY] = inst
    app.router.add_post("/v1/chat/completions", inst.chat)
    app.router.add_get("/v1/models", inst.models)
    app.router.add_get("/health", inst.health)
    app.router.add_get("/metrics", inst.metrics_text)
    app.router.add_get("/admin/traceparents", inst.received_traceparents)
    add_admin_routes(app, inst)
    return app
