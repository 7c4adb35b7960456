"""A zone outage with real processes: every instance of one zone answers errors while requests flow.

One fleet (``python -m app sim fleet``) of four instances of one model, two in ``az1`` and two in
``az2``, and one gateway (``python -m app serve --workers 1``). A thread sends 30 requests/s; after
a warm-up both az1 instances get an ``error`` fault (every answer a 5xx, through the
``/admin/faults`` mechanism ``test_breakers.py`` uses). 5xx answers do not count towards an instance
breaker (only timeouts and connect errors do), and the model breaker needs its share held for two
minutes (the default): the zone breaker ``zone/az1`` is the one that must react.

The instances are warm from the start and the score has no error term, so the four tie and the
picker's hash spreads the requests over both zones; nothing but the breaker steers them away from
az1 (see the fixture).

The test checks, on the gateway's wall clock (its breaker events' ``ts``; the test's ``time.time()``
on the same machine):

- ``zone/az1`` opens no sooner than ``for_s`` after the onset (the share must be *held*) and within
  a bound; no other breaker moves;
- requests sent between the onset and the opening still try az1 (and fail over); from 1 s after the
  opening until the half-open trial none tries az1 (their traces' attempts); from the onset until
  the faults are cleared every response comes from az2 (``x-routelens-instance``);
- a trace of a request while it is open has the zone breaker as a hard violation on both az1
  candidates, and none on the az2 ones;
- after ``open_s`` it goes half-open; its trial on the still-failing zone reopens it; once the faults
  are cleared it goes half-open again after ``open_s`` and closes after ``close_after`` passing
  trials, served by az1; az1 then serves its share again;
- no client request fails at all: an attempt that gets a 5xx from az1 (in flight at the onset, or
  a half-open trial) fails over, and ``max_attempts: 3`` leaves an az2 attempt even when both az1
  instances were tried first.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from app.run.procs import free_ports
from sim.behaviour import BUILTIN_MODELS, builtin_config
from tests.e2e.fleet_and_gateway import fleet_and_gateway
from tests.e2e.net import call
from tests.e2e.test_breakers import BODY, _get, _post, _served

pytestmark = pytest.mark.e2e
RPS = 30
MODEL = BUILTIN_MODELS[2]  # deepseek-coder-6b-int4: the most concurrency per instance
ZONES = {"int4-az1-a": "az1", "int4-az1-b": "az1", "int4-az2-a": "az2", "int4-az2-b": "az2"}
DOWN = "az1"
ZONE = {"threshold": 0.05, "for_s": 0.5, "window_s": 2, "min_requests": 5, "open_s": 2, "close_after": 2}
OPEN_BOUND_S = ZONE["for_s"] + 1.5  # onset -> open: the share held for_s, plus a loaded machine's slack
MOVED_BOUND_S = 1.0  # open -> no request tries az1 any more
SWEEP_SLACK_S = 1.0  # open_s -> half-open: the 0.1 s sweep plus a loaded machine's slack
# An event's ts is taken when the gateway records the transition (after the attempt that caused it, or
# a sweep), not at the transition itself: two events may be a little closer together than the breaker saw.
RECORD_SLACK_S = 0.1


@dataclass
class Fleet:
    gateway: str
    urls: dict[str, str]  # instance id -> base URL


@dataclass
class Answer:
    sent: float  # time.time() when sent
    status: int  # 0: no HTTP answer
    instance: str | None  # x-routelens-instance
    request_id: str | None


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp = tmp_path_factory.mktemp("zone-outage")
    *ports, gw = free_ports(len(ZONES) + 1)
    base = builtin_config(len(ZONES), 0, zero_delay=True)
    template = next(s for s in base.fleet.instances if s.model == MODEL.name)
    instances = [template.model_copy(update={"id": iid, "zone": zone, "url": f"http://127.0.0.1:{port}"})
                 for (iid, zone), port in zip(ZONES.items(), ports, strict=True)]
    cfg = base.model_dump(mode="json")
    # Warm from the start: a warm-up term still rising ranks the instance started first a hair above the
    # others, and the best score takes all the traffic (ties only are spread by a hash).
    cfg["sim"]["models"][MODEL.name]["warmup_s"] = 0.0
    cfg.update({
        "fleet": {"instances": [s.model_dump(mode="json") for s in instances]},
        "gateway": {"host": "127.0.0.1", "port": gw, "max_attempts": 3, "upstream_timeout_s": 3.0},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb")},
        "scrape": {"interval_s": 0.5, "timeout_s": 0.5, "stale_after_s": 3},
        "constraints": [{"name": "queue", "metric": "queue", "op": "<=", "threshold": 1e9}],
        "probes": {"enabled": False},
        "resilience": {"breakers": {"zone": ZONE}},  # instance and model breakers: the defaults
        # No error term: with the scores tied it would steer the traffic away from an instance after its
        # first 5xx, leaving the zone breaker a couple of errors among the warm-up's successes, maybe too
        # few to trip it (and nothing to show it moved the traffic). Here the breaker alone moves it.
        "scoring": {"weights": {"error": 0.0}},
    })
    with fleet_and_gateway(cfg, tmp) as gateway:
        yield Fleet(gateway, {s.id: s.url for s in instances})


def _load(url: str, stop: threading.Event, max_s: float, out: list[Answer]) -> None:
    """``RPS`` requests/s until ``stop`` is set (at most ``max_s``); every answer appended to ``out``."""
    import aiohttp

    async def run() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
            async def one() -> None:
                sent = time.time()
                try:
                    async with session.post(url, json=BODY) as resp:
                        await resp.read()
                        out.append(Answer(sent, resp.status, resp.headers.get("x-routelens-instance"),
                                          resp.headers.get("x-request-id")))
                except (aiohttp.ClientError, TimeoutError):
                    out.append(Answer(sent, 0, None, None))

            start, tasks = time.monotonic(), []
            for i in range(int(max_s * RPS)):
                if stop.is_set():
                    break
                await asyncio.sleep(max(0.0, start + i / RPS - time.monotonic()))
                tasks.append(asyncio.create_task(one()))
            await asyncio.gather(*tasks)

    asyncio.run(run())


@dataclass
class Move:
    ts: float  # the gateway's wall clock (Unix seconds)
    breaker: str  # "zone breaker az1"
    change: str  # "closed -> open (reason)"


class Events:
    """The breaker events of ``GET /v1/router/state`` not seen before, in order."""

    def __init__(self, gateway: str) -> None:
        self.gateway = gateway
        self.moves: list[Move] = []
        self._next = 0  # moves before it were awaited already (or skipped on the way)
        self._seen = {e["event_id"] for e in self._events()}

    def _events(self) -> list[dict[str, Any]]:
        return list(json.loads(_get(f"{self.gateway}/v1/router/state"))["breakers"]["events"])

    def wait(self, breaker: str, change: str, timeout_s: float) -> Move:
        """Poll every 50 ms until ``breaker`` makes a move starting with ``change`` (after the last one awaited)."""
        deadline = time.monotonic() + timeout_s
        while True:
            for e in self._events():
                if e["event_id"] not in self._seen:
                    self._seen.add(e["event_id"])
                    who, what = e["message"].split(": ", 1)
                    self.moves.append(Move(datetime.fromisoformat(e["ts"]).timestamp(), who, what))
            for i in range(self._next, len(self.moves)):  # one poll may bring several moves
                m = self.moves[i]
                if m.breaker == breaker and m.change.startswith(change):
                    self._next = i + 1
                    return m
            assert time.monotonic() < deadline, f"no {breaker}: {change} in {timeout_s} s: {self.moves}"
            time.sleep(0.05)


def _trace(gateway: str, request_id: str) -> dict[str, Any]:
    status, trace = call("GET", f"{gateway}/v1/traces/{request_id}")
    assert status == 200, (request_id, trace)
    return dict(trace)


def _zone_of(instance: str | None) -> str | None:
    return None if instance is None else ZONES.get(instance)


def test_zone_outage_opens_the_zone_breaker_moves_traffic_and_recovers(fleet: Fleet) -> None:
    gateway = fleet.gateway
    state = json.loads(_get(f"{gateway}/v1/router/state"))["breakers"]["breakers"]
    assert {(b["scope"], b["name"]) for b in state if b["scope"] == "zone"} == {("zone", "az1"), ("zone", "az2")}
    events = Events(gateway)
    answers: list[Answer] = []
    stop = threading.Event()
    thread = threading.Thread(target=_load, args=(f"{gateway}/v1/chat/completions", stop, 20.0, answers))
    before = _served(gateway)
    down, name = DOWN, f"zone breaker {DOWN}"
    down_ids = [i for i, z in ZONES.items() if z == down]
    thread.start()
    try:
        time.sleep(1.5)  # warm-up: both zones serve
        warm = _served(gateway)
        served = {i: warm.get(i, 0.0) - before.get(i, 0.0) for i in ZONES}
        assert all(sum(served[i] for i in ZONES if ZONES[i] == z) >= 2 * ZONE["min_requests"]
                   for z in set(ZONES.values())), served

        onset = time.time()
        for iid in down_ids:
            _post(f"{fleet.urls[iid]}/admin/faults", {"kind": "error", "rate": 1.0})
        struck = time.time()  # both az1 instances fail from here on
        opened = events.wait(name, "closed -> open", OPEN_BOUND_S + 3)
        half = events.wait(name, "open -> half_open", ZONE["open_s"] + SWEEP_SLACK_S + 3)
        reopened = events.wait(name, "half_open -> open", 3)  # the trial met the outage
        cleared = time.time()
        for iid in down_ids:
            assert call("DELETE", f"{fleet.urls[iid]}/admin/faults")[0] == 200
        half2 = events.wait(name, "open -> half_open", ZONE["open_s"] + SWEEP_SLACK_S + 3)
        closed = events.wait(name, "half_open -> closed", 5)
        time.sleep(0.7)  # az1 serves again
    finally:
        stop.set()
        thread.join()
        for iid in down_ids:  # whatever happened, leave the fleet without faults
            call("DELETE", f"{fleet.urls[iid]}/admin/faults")

    moves = [(round(m.ts - onset, 3), m.breaker, m.change) for m in events.moves]
    print("breaker moves, seconds after the onset:", *moves, sep="\n  ")  # shown when the test fails
    # The right breaker, and only it: 5xx answers are no instance failure, the model's share is not held 120 s.
    assert {m.breaker for m in events.moves} == {name}, moves
    # Opens once the share was held for_s, within the bound (onset was taken before the faults started).
    assert ZONE["for_s"] <= opened.ts - onset <= OPEN_BOUND_S, moves
    assert "error share" in opened.change, moves
    # Half-open after open_s, twice; the first trial fails (faults still there), the second round closes.
    assert ZONE["open_s"] - RECORD_SLACK_S <= half.ts - opened.ts <= ZONE["open_s"] + SWEEP_SLACK_S, moves
    assert "trial failed" in reopened.change and reopened.ts < cleared, moves
    assert half2.ts > cleared, moves
    assert ZONE["open_s"] - RECORD_SLACK_S <= half2.ts - reopened.ts <= ZONE["open_s"] + SWEEP_SLACK_S, moves
    assert f"{ZONE['close_after']} consecutive trial passes" in closed.change, moves

    # No client request failed: not those in flight at the onset, nor the failed trial's.
    assert len(answers) >= RPS * 5 and all(a.status == 200 for a in answers), \
        sorted({a.status for a in answers})
    # Every answer from the onset until the faults were cleared came from az2 ...
    outage = [a for a in answers if struck <= a.sent < cleared]
    assert outage and all(_zone_of(a.instance) not in (None, down) for a in outage), \
        [(round(a.sent - onset, 3), a.instance) for a in outage if _zone_of(a.instance) in (None, down)]
    # ... the passing trials that closed the breaker were served by az1, and az1 serves again after it.
    back = [a for a in answers if cleared <= a.sent <= closed.ts and _zone_of(a.instance) == down]
    assert len(back) >= ZONE["close_after"], [(round(a.sent - onset, 3), a.instance) for a in answers
                                               if a.sent >= cleared]
    after = [a for a in answers if a.sent > closed.ts]
    assert any(_zone_of(a.instance) == down for a in after), [a.instance for a in after]

    # Traffic moved: sent before the opening, requests tried az1 (about half: the tied scores) and failed
    # over; from MOVED_BOUND_S after it until the half-open trial, none tried az1 (their traces' attempts).
    def tried_down(a: Answer) -> bool:
        assert a.request_id is not None
        return any(_zone_of(t["instance"]) == down for t in _trace(gateway, a.request_id)["attempts"])

    onset_tried = [tried_down(a) for a in outage if a.sent < opened.ts]
    assert any(onset_tried), onset_tried
    open_phase = [a for a in outage if opened.ts <= a.sent < half.ts - 0.2]  # before the trial's request
    late = [round(a.sent - opened.ts, 3) for a in open_phase if tried_down(a)]
    print(f"sent after the opening and still tried az1 (s after it): {late}; before it: "
          f"{sum(onset_tried)} of {len(onset_tried)}")
    assert all(t < MOVED_BOUND_S for t in late), late
    settled = [a for a in open_phase if a.sent >= opened.ts + MOVED_BOUND_S]
    assert len(settled) >= RPS * (ZONE["open_s"] - MOVED_BOUND_S) / 3, len(settled)  # so the "none" means something

    # A trace of a request while the zone was open: both az1 candidates out on the zone breaker, az2 in.
    mid = settled[0]
    assert mid.request_id is not None
    trace = _trace(gateway, mid.request_id)
    cands = {c["instance"]: c for c in trace["candidates"]}
    assert set(cands) == set(ZONES), cands
    for iid, zone in ZONES.items():
        breaker = [v for v in cands[iid]["violations"] if v["metric"].startswith("breaker_")]
        assert cands[iid]["zone"] == zone, cands[iid]
        if zone == down:
            assert not cands[iid]["feasible"], cands[iid]
            assert [(v["metric"], v["severity"]) for v in breaker] == [("breaker_zone", "hard")], breaker
            assert breaker[0]["reason"].startswith(f"{name} open: error share"), breaker
        else:
            assert cands[iid]["feasible"] and not breaker, cands[iid]
    assert _zone_of(trace["selected_instance"]) not in (None, down), trace
