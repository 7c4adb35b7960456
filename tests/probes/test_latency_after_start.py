"""The first latency verdicts after a prober starts with a baseline loaded say what a later probe would.

A baseline is learned from an instance's first 10 healthy probes and persisted, so a restarted
prober judges the instance against it from its first probe on. But the restarted window holds one
probe, and the p95 of one probe is that probe: on an instance whose p95 is far above its p50 (two
slow answers in ten) the first probe read "80% below its baseline", a ``degraded`` result, and the
first verdict read ``ok`` (one result of three moves nothing) with that sentence as its reason.
"""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from app.run.prober import Prober
from probes.baselines import Baseline, BaselineStore
from probes.http import ChatCall
from probes.latency import LatencyTracker
from probes.verdicts import Hysteresis
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config import RouteLensConfig
from schemas.config.probes import LatencyProbeSettings, ProbeHysteresis
from schemas.probe import ProbeResult
from schemas.records import RouterEvent
from tests.probes.conftest import completion, serving

FAST_MS, SLOW_MS = 100.0, 500.0  # 8 fast answers then 2 slow ones, over and over: p50 100 ms, p95 500 ms


class Latency:
    """The probe requests' clock (``ProbeRunner.perf``): the instance moves it by its service time.

    One instance and one kind: one probe in flight at a time, so a probe's elapsed time is exactly
    the service time its answer took (a loaded machine's stalls add nothing: real time is not read).
    """

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _instance(clock: Latency) -> web.Application:
    served = [0]

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        n, served[0] = served[0], served[0] + 1
        clock.t += (SLOW_MS if n % 10 >= 8 else FAST_MS) / 1000
        return web.json_response(completion())

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def _run(url: str, db: str, clock: Latency, results: int) -> list[BaseModel]:
    """One prober's life: start, ``results`` latency probes, stop; everything it emitted."""
    config = RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": "a", "model": "m", "url": url}]},
        "probes": {"enabled": True, "kinds": ["latency"], "interval_s": 0.1, "jitter": 0}})
    out: list[BaseModel] = []
    prober = Prober(config, db_path=db, emit=out.append, apply=None, registry=CollectorRegistry(),
                    rng=random.Random(1))
    await prober.start()
    assert prober.runner is not None
    prober.runner.perf = clock  # before the first slot (half an interval away): no await in between
    try:
        async with asyncio.timeout(60):
            while sum(isinstance(o, ProbeResult) for o in out) < results:
                await asyncio.sleep(0.02)
    finally:
        await prober.stop()
    return out


def test_a_restarted_prober_judges_its_first_probes_as_a_later_probe_would(tmp_path: Path) -> None:
    db = str(tmp_path / "traces.duckdb")
    file = Path(f"{db}.probe-baselines.json")  # where the prober keeps baselines by default

    async def main() -> tuple[list[BaseModel], list[BaseModel]]:
        clock = Latency()
        async with serving(_instance(clock)) as url:
            return await _run(url, db, clock, 10), await _run(url, db, clock, 14)

    first, second = asyncio.run(main())
    base = BaselineStore(file).get("a")  # learned by the first run, from 8 fast probes and 2 slow ones
    assert base is not None and base.samples == 10  # the first run's 10 probes
    assert (base.p50_ms, base.p95_ms) == (pytest.approx(FAST_MS), pytest.approx(SLOW_MS))
    learned = json.loads(file.read_text())

    results = [o for o in second if isinstance(o, ProbeResult)]
    assert [r.verdict for r in results] == [ProbeVerdict.OK] * len(results)  # was: degraded, "80% below"
    filling, full = results[:9], results[9:]
    assert all(r.reason.startswith(f"window filling ({i}/10 probes)") and r.baseline is None
               for i, r in enumerate(filling, 1))
    assert all(r.reason == "" and r.baseline == base.p95_ms for r in full)  # judged once the window is full
    events = [o.message for o in second if isinstance(o, RouterEvent) and o.kind == "probe_verdict"]
    assert events == [f"latency probe verdict ok: {filling[0].reason}"]  # was: "ok: ... 80% below its baseline"
    assert json.loads(file.read_text()) == learned  # judged against the loaded baseline, never relearned
    assert all(r.verdict is ProbeVerdict.OK for r in first if isinstance(r, ProbeResult))


SETTINGS = LatencyProbeSettings()  # a window of 10, a baseline from 10 probes, ±20%


def _ms(ms: float) -> ChatCall:
    return ChatCall(200, b"{}", ms)


def _pair(tmp_path: Path, learn: list[float]) -> tuple[LatencyTracker, LatencyTracker]:
    """A tracker that keeps running and one started afresh on the baselines file it wrote."""
    path = tmp_path / "b.json"
    running = LatencyTracker(SETTINGS, BaselineStore(path), wall=lambda: datetime(2026, 12, 7, tzinfo=UTC))
    for ms in learn:
        running.observe("a", _ms(ms))
    return running, LatencyTracker(SETTINGS, BaselineStore(path))


def test_a_short_window_is_judged_only_where_the_full_one_agrees(tmp_path: Path) -> None:
    rng = random.Random(7)
    healthy = [100 + rng.uniform(-5, 5) if i % 10 < 8 else 300 + rng.uniform(-5, 5) for i in range(40)]
    running, restarted = _pair(tmp_path, healthy[:10])
    for ms in healthy[10:]:
        a, b = running.observe("a", _ms(ms)), restarted.observe("a", _ms(ms))
        assert a.verdict is b.verdict is ProbeVerdict.OK, (a.reason, b.reason)
    running, restarted = _pair(tmp_path, healthy[:10])
    for ms in (600.0, 610.0):  # slow after the start: the short window's p95 is already above, as a full one's
        a, b = running.observe("a", _ms(ms)), restarted.observe("a", _ms(ms))
        assert a.verdict is b.verdict is ProbeVerdict.DEGRADED and b.error_class == "off_baseline"
        assert "above its baseline" in b.reason and b.baseline == a.baseline


def test_a_baseline_changed_under_the_prober_refills_the_window_before_judging(tmp_path: Path) -> None:
    running, _ = _pair(tmp_path, [100.0] * 10)
    BaselineStore(tmp_path / "b.json").set("a", Baseline(150.0, 300.0, 10, "later"))  # another process
    j = running.observe("a", _ms(150.0))
    assert j.verdict is ProbeVerdict.OK and j.reason.startswith("window filling (1/10 probes)")


def _result(i: int, verdict: ProbeVerdict, reason: str = "") -> ProbeResult:
    return ProbeResult(probe_id=f"p{i}", ts=datetime(2026, 12, 7, 0, 0, i, tzinfo=UTC), instance="a", model="m",
                       kind=ProbeKind.LATENCY, verdict=verdict, value=1.0, reason=reason)


def test_a_verdict_held_against_the_latest_result_says_so_instead_of_taking_its_reason() -> None:
    h = Hysteresis(ProbeHysteresis(fail_k=2, fail_n=3, recover_m=3), ProbeKind.LATENCY)
    below = "window p95 29.8 ms is 65% below its baseline 85.1 ms (tolerance ±20%)"
    first = h.observe(_result(0, ProbeVerdict.DEGRADED, below))
    assert first is not None and first.verdict is ProbeVerdict.OK
    assert first.reason == ("ok held (1 of the last 1 probes not ok, 2 needed to change it); "
                            f"the latest probe degraded: {below}")
    changed = h.observe(_result(1, ProbeVerdict.DEGRADED, below))
    assert changed is not None and changed.verdict is ProbeVerdict.DEGRADED and changed.reason == below
    h.observe(_result(2, ProbeVerdict.OK))
    assert h.status is not None and h.status.verdict is ProbeVerdict.DEGRADED
    assert h.status.reason == "degraded held (1 ok probes in a row, of the 3 needed to recover); the latest probe ok"
    h.observe(_result(3, ProbeVerdict.FAILED, "latency probe failed: no answer"))
    assert h.status is not None and h.status.reason.startswith("degraded held (1 of the last 3 probes failed, 2 needed")
