"""A workload: arrivals from a rate curve, the corpus mix, multi-turn ticket sessions, and feedback.

The plan (which query, session and turn at which offset) is drawn up front from the seed; the run
sends it open-loop through the gateway, grades each answer against ground truth, and posts
``POST /v1/feedback`` (``correct``: the grade; ``expected_class``, ``expected_model``) so that the
gateway's side counts misroutes (``correct=false``) and how many requests went to the expected model.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import aiohttp
from openai import AsyncOpenAI

from schemas.config.sim import SimModelProfile
from sim.behaviour import expected_model
from sim.corpus import CLASSES, FOLLOW_UPS, QUERIES, Query, grade, session_text
from sim.scenarios import TrafficSpec
from sim.traffic import TrafficResult, open_loop, send_chat
from sim.traffic_report import is_judged_correct

__all__ = ["Planned", "plan_workload", "run_workload"]

_SESSION_CLASSES = ("ticket", "contract")  # the seeds' multi-turn traffic: tickets and compliance reviews


@dataclass(frozen=True, slots=True)
class Planned:
    """One request of the plan: when, what, and its place in a session."""

    index: int
    at_s: float
    query: Query
    session: str | None = None
    turn: int = 0
    follow_up: str | None = None
    stream: bool = False


@dataclass
class _Open:
    ticket: str
    query: Query
    turns: int
    next_turn: int = 1
    ready_at: float = 0.0


def plan_workload(spec: TrafficSpec, duration_s: float, seed: int = 0) -> list[Planned]:
    """Draw the requests of a run: deterministic for ``(spec, duration_s, seed)``.

    Args:
        spec: Curve, mix, sessions and streaming share.
        duration_s: Length of the schedule.
        seed: Seeds arrivals and choices.

    Returns:
        The planned requests in sending order.
    """
    rng = random.Random(seed)
    times = spec.curve.arrivals(duration_s, rng, spec.max_requests)
    by_class = {c: [q for q in QUERIES if q.cls == c] for c in CLASSES}
    weighted = [(c, w) for c, w in spec.mix.items() if w > 0] or [(c, 1.0) for c in CLASSES]
    session_classes = [c for c, _ in weighted if c in _SESSION_CLASSES] or ["ticket"]
    opened: list[_Open] = []
    out: list[Planned] = []
    for index, at in enumerate(times):
        stream = rng.random() < spec.stream_share
        due = [s for s in opened if s.ready_at <= at]
        if due and rng.random() < 0.5:
            s = rng.choice(due)
            follow = rng.choice(FOLLOW_UPS[s.query.lang])
            out.append(Planned(index, at, s.query, s.ticket, s.next_turn, follow, stream))
            s.next_turn += 1
            s.ready_at = at + spec.think_s
            if s.next_turn >= s.turns:
                opened.remove(s)
            continue
        if rng.random() < spec.session_share:
            query = rng.choice(by_class[rng.choice(session_classes)])
            ticket = f"T-{rng.randrange(10**6):06d}"
            opened.append(_Open(ticket, query, rng.randint(*spec.turns), ready_at=at + spec.think_s))
            out.append(Planned(index, at, query, ticket, 0, None, stream))
        else:
            cls = rng.choices([c for c, _ in weighted], [w for _, w in weighted])[0]
            out.append(Planned(index, at, rng.choice(by_class[cls]), stream=stream))
    return out


async def run_workload(base_url: str, plan: list[Planned], spec: TrafficSpec, *,
                       profiles: Mapping[str, SimModelProfile] | None = None,
                       on_result: Callable[[TrafficResult], None] | None = None,
                       origin: float | None = None,
                       clock: Callable[[], float] = time.perf_counter) -> list[TrafficResult]:
    """Send ``plan`` through the gateway at ``base_url``, grade the answers and post feedback.

    Args:
        base_url: The gateway, without ``/v1``.
        plan: From :func:`plan_workload`.
        spec: Concurrency, timeout and whether to post feedback.
        profiles: Models served and their behaviour, for ``expected_model``.
        on_result: Called with each result as it arrives.
        origin: ``loop.time()`` that offsets count from (now by default).
        clock: Seconds, for latencies.

    Returns:
        The results in sending order.
    """
    sessions: dict[str, list[tuple[str, str | None]]] = {}
    models = dict(profiles or {})

    async with (AsyncOpenAI(base_url=f"{base_url}/v1", api_key="routelens", max_retries=0,
                            timeout=spec.timeout_s) as client,
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=spec.timeout_s)) as http):

        async def send(index: int, at_s: float, item: Planned) -> TrafficResult:
            q = item.query
            text = item.follow_up if item.turn else (session_text(q, item.session) if item.session else q.text)
            history = sessions.setdefault(item.session, []) if item.session else []
            messages = [m for u, a in history for m in ({"role": "user", "content": u},
                                                         *([{"role": "assistant", "content": a}] if a else []))]
            messages.append({"role": "user", "content": text or q.text})
            slot = len(history)
            history.append((text or q.text, None))
            sent = await send_chat(client, index, q, messages, clock, sent_at_s=at_s, stream=item.stream,
                                   session=item.session, turn=item.turn)
            result = sent.result
            if sent.answer is not None:
                history[slot] = (history[slot][0], sent.answer)
                result = replace(result, grade=grade(q, sent.answer))
            result = replace(result, expected_model=expected_model(q.cls, q.text, models))
            if spec.feedback and result.request_id:
                result = replace(result, feedback_status=await _feedback(http, base_url, result))
            return result

        return await open_loop(((p.index, p.at_s, p) for p in plan), send, concurrency=spec.concurrency,
                               on_result=on_result, origin=origin)


async def _feedback(http: aiohttp.ClientSession, base_url: str, result: TrafficResult) -> int | None:
    body = {"request_id": result.request_id, "correct": is_judged_correct(result), "expected_class": result.cls,
            "expected_model": result.expected_model, "source": "sim-traffic"}
    try:
        async with http.post(f"{base_url}/v1/feedback", json=body) as resp:
            await resp.read()
            return resp.status
    except (aiohttp.ClientError, TimeoutError):
        return None
