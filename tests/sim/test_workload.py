"""Rate curves, the workload plan (mix, sessions) and a run with grading and feedback."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import orjson
import pytest
from aiohttp import web

from schemas.config.sim import SimModelProfile, SimSettings
from sim.behaviour import BUILTIN_MODELS
from sim.rates import RateCurve
from sim.scenarios import TrafficSpec
from sim.server import build_instance_app
from sim.traffic_report import summarise
from sim.workload import plan_workload, run_workload


def test_steady_and_surge_arrivals():
    exact = RateCurve(rps=10, poisson=False).arrivals(2.0, random.Random(0))
    assert len(exact) == 20 and exact[:3] == pytest.approx([0.0, 0.1, 0.2])
    surge = RateCurve(kind="surge", rps=20, surge_start_s=10, surge_duration_s=10, surge_multiplier=10)
    times = surge.arrivals(30, random.Random(1))
    assert surge.arrivals(30, random.Random(1)) == times
    inside = sum(10 <= t < 20 for t in times)
    assert inside / (len(times) - inside) == pytest.approx(5.0, rel=0.2)  # x10 for 10 s against 20 s
    assert RateCurve(rps=5).arrivals(100, random.Random(2), limit=7) == RateCurve(rps=5).arrivals(
        100, random.Random(2))[:7]


def test_diurnal_rate_swings_around_the_base():
    curve = RateCurve(kind="diurnal", rps=10, period_s=40, amplitude=0.5)
    assert [curve.rate(t) for t in (0, 10, 30)] == pytest.approx([10, 15, 5])
    with pytest.raises(ValueError, match="surge_start_s"):
        RateCurve(kind="surge")


def test_plan_follows_the_mix_and_sessions_carry_a_ticket_over_turns():
    spec = TrafficSpec(curve=RateCurve(rps=50), mix={"ticket": 3, "code": 1}, session_share=0.3, think_s=0.5)
    plan = plan_workload(spec, 20, seed=4)
    assert plan == plan_workload(spec, 20, seed=4)
    classes = Counter(p.query.cls for p in plan if p.session is None)
    assert set(classes) == {"ticket", "code"} and classes["ticket"] > 2 * classes["code"]
    sessions: dict[str, list] = {}
    for item in plan:
        if item.session:
            sessions.setdefault(item.session, []).append(item)
    assert sessions and any(len(turns) >= 2 for turns in sessions.values())
    for turns in sessions.values():
        assert [t.turn for t in turns] == list(range(len(turns)))
        assert len({t.query for t in turns}) == 1 and all(t.follow_up for t in turns[1:])
        assert all(b.at_s - a.at_s >= 0.5 for a, b in zip(turns, turns[1:], strict=False))


def _stub_gateway(spec, feedback: list[dict]) -> web.Application:
    """A simulated instance behind routes and headers shaped like the gateway's."""
    app = build_instance_app(spec, SimModelProfile(), SimSettings(zero_delay=True, seed=2))

    async def post_feedback(request: web.Request) -> web.Response:
        feedback.append(orjson.loads(await request.read()))
        return web.json_response({"status": "accepted"}, status=202)

    async def headers(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["x-routelens-instance"] = "sim-a"
        response.headers["x-routelens-model"] = "deepseek-v4-32k"

    app.router.add_post("/v1/feedback", post_feedback)
    app.on_response_prepare.append(headers)
    return app


def test_run_grades_answers_and_posts_feedback(spec, serve):
    feedback: list[dict] = []
    spec_t = TrafficSpec(curve=RateCurve(rps=200, poisson=False), session_share=0.5, think_s=0.02, stream_share=0.3)
    plan = plan_workload(spec_t, 0.3, seed=1)
    profiles = {m.name: m.profile for m in BUILTIN_MODELS}
    big = spec.model_copy(update={"context_window": 32768})

    async def scenario():
        async with serve(_stub_gateway(big, feedback)) as url:
            return await run_workload(url, plan, spec_t, profiles=profiles)

    results = asyncio.run(scenario())
    assert [r.index for r in results] == [p.index for p in plan]
    assert all(r.status == "ok" and r.grade in {"correct", "wrong"} for r in results)
    assert {r.stream for r in results} == {True, False} and any(r.turn > 0 for r in results)
    assert all(r.instance == "sim-a" and r.feedback_status == 202 for r in results)
    assert len(feedback) == len(results)
    by_id = {f["request_id"]: f for f in feedback}
    for r in results:
        sent = by_id[r.request_id]
        assert sent == {"request_id": r.request_id, "correct": r.grade == "correct", "expected_class": r.cls,
                        "expected_model": r.expected_model, "source": "sim-traffic"}
    # The summary's misroutes are the verdicts posted correct=false (what the store counts), and the
    # answers served by another model than expected are counted apart.
    summary = summarise(results)
    assert summary["feedback_wrong"] == sum(not f["correct"] for f in feedback) and "misroutes" not in summary
    assert summary["off_target"] == sum(r.model != r.expected_model for r in results if r.expected_model)
