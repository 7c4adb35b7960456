"""The behaviour model seen over HTTP: warm-up moves the metrics, accuracy follows (model, class)."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiohttp import ClientSession

from schemas.config.sim import SimModelProfile, SimSettings
from sim.behaviour import p_correct
from sim.clock import VirtualClock
from sim.corpus import QUERIES, grade, session_text
from sim.server import build_instance_app
from tests.promtext import value
from tests.sim.conftest import SPEC_LABELS

MATHS = [q for q in QUERIES if q.cls == "math"]


def test_warmup_gauge_and_ttft_follow_the_ramp(spec, serve):
    clock = VirtualClock()
    profile = SimModelProfile(warmup_s=90, cold_speed=0.25)
    body = {"model": "m", "messages": [{"role": "user", "content": MATHS[0].text}]}

    async def scenario():
        app = build_instance_app(spec, profile, SimSettings(zero_delay=True, time_scale=3.0), clock=clock)
        async with serve(app) as url, ClientSession() as http:
            seen = []
            for _ in range(2):
                async with http.post(f"{url}/v1/chat/completions", json=body) as resp:
                    assert resp.status == 200
                async with http.get(f"{url}/metrics") as resp:
                    text = await resp.text()
                seen.append((value(text, "routelens_sim_warmup_progress", **SPEC_LABELS),
                             value(text, "vllm:time_to_first_token_seconds_sum", **SPEC_LABELS)))
                clock.advance(30)  # x3: 90 s of model time
            return seen

    (cold_progress, cold_ttft), (warm_progress, ttft_sum) = asyncio.run(scenario())
    assert (cold_progress, warm_progress) == (0.0, 1.0)
    assert ttft_sum - cold_ttft == pytest.approx(cold_ttft * 0.25)


def _share_correct(spec, serve, profile: SimModelProfile, n: int = 300) -> float:
    async def scenario() -> float:
        app = build_instance_app(spec, profile, SimSettings(zero_delay=True, seed=9))
        async with serve(app) as url, ClientSession() as http:
            correct = 0
            for i in range(n):
                query = MATHS[i % len(MATHS)]
                text = session_text(query, f"T-{i:06d}")
                async with http.post(f"{url}/v1/chat/completions",
                                     json={"model": "m", "messages": [{"role": "user", "content": text}]}) as resp:
                    answer = orjson.loads(await resp.read())["choices"][0]["message"]["content"]
                correct += grade(query, answer) == "correct"
            return correct / n

    return asyncio.run(scenario())


def test_int4_answers_maths_worse_than_fp16_as_the_profile_says(spec, serve):
    fp16 = SimModelProfile(accuracy={"math": 0.9})
    int4 = fp16.model_copy(update={"quantization": "int4"})
    got_fp16, got_int4 = _share_correct(spec, serve, fp16), _share_correct(spec, serve, int4)
    assert got_fp16 == pytest.approx(p_correct(fp16, "math", MATHS[0].text), abs=0.06)
    assert got_int4 == pytest.approx(p_correct(int4, "math", MATHS[0].text), abs=0.06)
    assert got_int4 < got_fp16
