"""The latency probe: baseline learning, ±20% in both directions, a creep found as a trend, persistence."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime

import aiohttp
import pytest

from probes.baselines import BaselineStore
from probes.http import ChatCall
from probes.latency import LatencyTracker, latency_prompt, mann_kendall_p, percentile, theil_sen_slope
from probes.runner import ProbeRunner
from probes.types import Target
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.probes import LatencyProbeSettings
from sim.clock import VirtualClock
from sim.corpus import estimate_tokens
from tests.probes.conftest import MODEL, fast_settings, serving, sim_app

SETTINGS = LatencyProbeSettings()  # window 10, baseline 10, ±20%, trend 8 probes, p < 0.01, rise ≥ 10%
WALL = datetime(2026, 1, 1, tzinfo=UTC)


def _tracker(store: BaselineStore | None = None) -> LatencyTracker:
    return LatencyTracker(SETTINGS, store or BaselineStore(), wall=lambda: WALL)


def _ms(ms: float) -> ChatCall:
    return ChatCall(200, b"{}", ms)


def _learn(t: LatencyTracker, rng: random.Random, around: float = 100.0) -> None:
    for _ in range(SETTINGS.baseline_probes):
        t.observe("a", _ms(around + rng.uniform(-3, 3)))


def test_prompt_is_fixed_and_has_the_configured_tokens() -> None:
    assert latency_prompt(128) == latency_prompt(128)
    assert estimate_tokens(latency_prompt(128)) == 128 and len(latency_prompt(7)) == 28


def test_learning_then_baseline_learned_and_ok() -> None:
    t, rng = _tracker(), random.Random(1)
    first = t.observe("a", _ms(100))
    assert first.verdict is ProbeVerdict.OK and first.reason == "learning baseline (1/10)" and first.baseline is None
    for _ in range(8):
        t.observe("a", _ms(100 + rng.uniform(-3, 3)))
    tenth = t.observe("a", _ms(101))
    base = t.store.get("a")
    assert base is not None and base.samples == 10 and 97 < base.p50_ms < 103 and base.learned_at == WALL.isoformat()
    assert tenth.verdict is ProbeVerdict.OK and tenth.baseline == base.p95_ms
    assert tenth.threshold == pytest.approx(base.p95_ms * 1.2)
    assert tenth.value == pytest.approx(percentile(t.window("a"), 95))


@pytest.mark.parametrize(("latency", "side"), [(160.0, "above"), (40.0, "below")])
def test_more_than_20_percent_off_either_way_is_degraded(latency: float, side: str) -> None:
    t, rng = _tracker(), random.Random(2)
    _learn(t, rng)
    verdicts = [t.observe("a", _ms(latency)) for _ in range(5)]
    assert verdicts[-1].verdict is ProbeVerdict.DEGRADED and verdicts[-1].error_class == "off_baseline"
    assert f"% {side} its baseline" in verdicts[-1].reason and verdicts[-1].reason.startswith("window p")


def test_within_tolerance_stays_ok() -> None:
    t, rng = _tracker(), random.Random(3)
    _learn(t, rng)
    assert all(t.observe("a", _ms(100 + rng.uniform(-8, 8))).verdict is ProbeVerdict.OK for _ in range(30))


def test_failed_request_is_failed_and_does_not_enter_the_window() -> None:
    t = _tracker()
    j = t.observe("a", ChatCall(None, None, 2000.0, "timeout", "no answer within 2 s"))
    assert j.verdict is ProbeVerdict.FAILED and j.error_class == "timeout" and "no answer within 2 s" in j.reason
    j = t.observe("a", ChatCall(503, b'{"error": {"message": "overloaded"}}', 5.0))
    assert j.verdict is ProbeVerdict.FAILED and j.reason == "latency probe failed: HTTP 503: overloaded"
    assert t.window("a") == []


def test_a_slow_creep_is_a_trend_before_it_crosses_20_percent() -> None:
    t, rng = _tracker(), random.Random(4)
    _learn(t, rng)
    base = t.store.get("a")
    assert base is not None
    seen = []
    for i in range(1, 40):  # +1.5% of the baseline per probe, with a little noise
        seen.append(t.observe("a", _ms(100 * (1 + 0.015 * i) + rng.uniform(-0.5, 0.5))))
    first = next(j for j in seen if j.verdict is ProbeVerdict.DEGRADED)
    assert first.error_class == "trend" and "Mann-Kendall" in first.reason
    assert first.value is not None and first.value < base.p95_ms * 1.2  # not yet off the baseline


def test_noise_is_not_a_trend() -> None:
    t, rng = _tracker(), random.Random(5)
    _learn(t, rng)
    assert not any(t.observe("a", _ms(100 + rng.gauss(0, 4))).error_class == "trend" for _ in range(200))


def test_baseline_persists_across_a_new_store(tmp_path) -> None:
    path = tmp_path / "baselines.json"
    t, rng = _tracker(BaselineStore(path)), random.Random(6)
    _learn(t, rng)
    learned = t.store.get("a")
    again = _tracker(BaselineStore(path))  # a restart
    assert again.store.get("a") == learned and again.store.load_error is None
    j = again.observe("a", _ms(170))  # degraded at once: not relearned as normal
    assert j.verdict is ProbeVerdict.DEGRADED and j.baseline == learned.p95_ms  # type: ignore[union-attr]
    assert json.loads(path.read_text())["version"] == 1


CORRUPT = ["{not json", '{"version": 99, "baselines": {}}', '{"version": 1, "baselines": {"a": {}}}', "[]"]


@pytest.mark.parametrize("text", CORRUPT)
def test_a_corrupt_file_is_reported_and_ignored(tmp_path, text: str) -> None:
    path = tmp_path / "baselines.json"
    path.write_text(text)
    store = BaselineStore(path)
    assert store.all() == {} and store.load_error is not None and str(path) in store.load_error
    j = _tracker(store).observe("a", _ms(100))
    assert j.reason == "learning baseline (1/10)"


def test_statistics_match_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(7)
    for _ in range(20):
        xs = [i * rng.uniform(0, 1) + rng.gauss(0, 2) for i in range(8)]
        expected = stats.kendalltau(range(8), xs, alternative="greater").pvalue
        assert mann_kendall_p(xs) == pytest.approx(expected)
        assert theil_sen_slope(xs) == pytest.approx(stats.theilslopes(xs).slope)


def test_the_sims_leak_fault_turns_latency_degraded_before_the_instance_errors() -> None:
    clock = VirtualClock()  # the leak grows with the sim's clock; service times are really slept
    settings = fast_settings(latency=LatencyProbeSettings(baseline_probes=3, window=3, trend_window=4))

    async def main():
        async with serving(sim_app(zero_delay=False, clock=clock)) as url, aiohttp.ClientSession() as session:
            runner = ProbeRunner(settings, session, embedder=None, baselines=BaselineStore())
            target = Target("sim-a", MODEL, url)
            for _ in range(3):
                await runner.run(ProbeKind.LATENCY, target)
            async with session.post(f"{url}/admin/faults", json={"kind": "leak", "rate": 0.2}) as resp:
                assert resp.status == 201
            seen = []
            for _ in range(20):
                clock.advance(6.0)  # +2% of the KV cache leaked per probe: +8% service time
                latency = await runner.run(ProbeKind.LATENCY, target)
                syntax = await runner.run(ProbeKind.SYNTAX, target)
                seen.append((latency, syntax))
                if latency.verdict is ProbeVerdict.DEGRADED:
                    break
            return seen

    seen = asyncio.run(main())
    latency, _ = seen[-1]
    assert latency.verdict is ProbeVerdict.DEGRADED and latency.error_class in ("off_baseline", "trend")
    assert all(s.verdict is ProbeVerdict.OK for _, s in seen)  # the instance still answers well-formed 200s
