"""What the demo prints as its day unfolds: one line per transition, each naming the page that shows it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.config import load_config
from app.run.narrator import Narrator
from schemas.config import RouteLensConfig
from sim.day import Injected
from sim.faults import FaultSpec
from sim.traffic import TrafficResult

ROOT = Path(__file__).resolve().parents[3]
APP = "http://127.0.0.1:8501"


@pytest.fixture(scope="module")
def config() -> RouteLensConfig:
    return load_config(ROOT / "routelens.yaml")


def narrator(config: RouteLensConfig, app: str | None = APP) -> tuple[Narrator, list[str]]:
    lines: list[str] = []
    return Narrator(config, "http://127.0.0.1:8080", app, say=lines.append,
                    now=lambda: datetime(2026, 12, 4, 12, tzinfo=UTC)), lines


def state(kv: float, out: bool, *, semantic: str | None = None,
          events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    probes = [] if semantic is None else [{"kind": "semantic", "verdict": semantic,
                                           "reason": "drifted" if semantic != "ok" else ""}]
    snap = {"instance": "coder-6b-a", "latches": [{"constraint": "kv-cache", "out": out, "value": kv}],
            "probes": probes}
    return {"instances": [snap], "breakers": {"events": events or []}}


def test_a_kv_latch_out_held_by_hysteresis_and_back_in(config) -> None:
    n, lines = narrator(config)
    for kv, out in [(0.5, False), (0.9, False), (0.93, True), (0.93, True), (0.82, True), (0.81, True),
                    (0.3, True), (0.3, False)]:
        n.check_state(state(kv, out))
    said = [line.split(" ", 1)[1] for line in lines]
    assert len(said) == 3, said
    assert said[0].startswith("coder-6b-a broke kv-cache (kv_cache_usage 0.93 <= 0.85 failed for 2 s) -> out")
    assert said[0].endswith(f": {APP}/constraints?instance=coder-6b-a&window=15m")
    assert "0.82 is back within 0.85 but stays out until it holds 0.8 for 5 s (hysteresis)" in said[1]
    assert "back in the feasible set" in said[2] and said[2].endswith(f"{APP}/fleet?instance=coder-6b-a&window=15m")


def test_a_probe_exclusion_and_recovery_link_the_probes_page(config) -> None:
    n, lines = narrator(config)
    for verdict in ["ok", "failed", "failed", "ok"]:
        n.check_state(state(0.1, False, semantic=verdict))
    assert len(lines) == 3
    assert lines[0] == "  probe    coder-6b-a   semantic ok"  # the first round, as the demo always printed it
    assert "semantic probe failed (drifted) -> excluded from routing" in lines[1]
    assert lines[2].endswith(f"passes again -> back in routing: {APP}/probes?instance=coder-6b-a")


def test_each_breaker_event_once(config) -> None:
    n, lines = narrator(config)
    ev = [{"event_id": "e1", "instance": "coder-6b-b", "message": "instance breaker coder-6b-b: closed -> open (x)"}]
    n.check_state(state(0.1, False, events=ev))
    n.check_state(state(0.1, False, events=[*ev, {"event_id": "e2", "instance": "coder-6b-b",
                                                  "message": "instance breaker coder-6b-b: open -> half_open"}]))
    assert [line.split(": ", 1)[0][9:] for line in lines] == [
        "coder-6b-b breaker closed -> open (x) -> its requests go elsewhere",
        "coder-6b-b breaker open -> half_open -> trial requests test it"]
    assert all(line.endswith(f"{APP}/fleet?instance=coder-6b-b&window=15m") for line in lines)


def test_alerts_fire_and_resolve(config) -> None:
    n, lines = narrator(config)
    alert = {"fingerprint": "f", "state": "firing", "name": "RouteLensProbeSemanticDrift", "instance": "v4-32k-b",
             "summary": "drifted"}
    n.check_alerts([alert])
    n.check_alerts([alert])
    n.check_alerts([])
    assert len(lines) == 2 and "firing on v4-32k-b" in lines[0] and "resolved on v4-32k-b" in lines[1]


def test_the_script_and_the_first_misroute_of_the_day(config) -> None:
    n, lines = narrator(config)
    n.on_inject(Injected(0, "coder-6b-b", FaultSpec(kind="crash", duration_s=20), {"id": "f1"}))
    base = dict(index=0, cls="code", lang="en", query_hash="sha256:0", status="ok", http_status=200, latency_ms=1.0,
                feedback_status=200, expected_model="deepseek-coder-6b-fp16")
    n.on_result(TrafficResult(**base, request_id="r1", model="deepseek-coder-6b-fp16", grade="correct"))
    n.on_result(TrafficResult(**base, request_id="r2", model="deepseek-v4-32k", grade="wrong"))
    n.on_result(TrafficResult(**base, request_id="r3", model="deepseek-v4-32k", grade="wrong"))
    assert len(lines) == 2 and "coder-6b-b's process crashes for 20 s" in lines[0]
    assert "feedback marks r2 a misroute" in lines[1] and lines[1].endswith(f"{APP}/trace?request_id=r2")
    assert n._misroutes == 2 and n._requests == 3


def test_without_the_app_a_line_names_the_gateway_route(config) -> None:
    n, lines = narrator(config, app=None)
    n.check_state(state(0.95, True))
    # the day's window (4 minutes from the narrator's start); not `instance=`: the route reads it as the serving one
    assert lines[0].endswith(": http://127.0.0.1:8080/v1/analytics/constraints?start=2026-12-04T12%3A00%3A00%2B00%3A00"
                             "&end=2026-12-04T12%3A04%3A00%2B00%3A00"), lines[0]


class FakeStore:
    """The gateway's query API as the narrator reads it: one rule-routed trace, a flipped shadow, two arms."""

    def get_json(self, path: str) -> Any:
        if path.startswith("/v1/traces?"):
            return {"items": [{"request_id": "r9", "selected_model": "big"}]}
        if path.startswith("/v1/traces/"):
            return {"shadow": {"router_version": "rc1", "selected_instance": "coder-6b-b", "flipped": True}}
        if path.startswith("/v1/analytics/compare"):
            return {"n_a": 50, "n_b": 60, "metrics": {"cost_per_request": {"a": 1.17, "b": 1.44}}}
        raise AssertionError(path)


def test_the_store_tells_the_first_rule_route_the_shadow_the_peak_and_the_arms_at_noon(config) -> None:
    clock = [datetime(2026, 12, 4, 12, tzinfo=UTC)]
    lines: list[str] = []
    n = Narrator(config, "http://127.0.0.1:8080", APP, day_s=240, say=lines.append, now=lambda: clock[0])
    n._api = FakeStore()
    n.on_day(0)
    n.on_result(TrafficResult(index=0, cls="code", lang="en", query_hash="sha256:0", status="ok", http_status=200,
                              latency_ms=1.0, request_id="r1", model="m", grade="correct"))
    n.check_state({"instances": [{"instance": "v4-32k-a", "running": 7, "queue": 3, "kv_cache_usage": 0.12},
                                 {"instance": "coder-6b-b", "running": 0, "queue": 0, "kv_cache_usage": 0.0,
                                  "stale": True, "age_s": 12.2}],
                   "policy": {"rules": [{"name": "long_context_priority"}]}})
    n.check_store()
    assert [line.split(" ", 2)[1] for line in lines[1:]] == ["rule", "shadow"]
    assert lines[1].endswith(f"{APP}/decisions?rule=long_context_priority&window=15m")
    assert "would have sent it to coder-6b-b" in lines[2]
    clock[0] = clock[0].replace(minute=2)  # noon of a 4-minute day: past the peak (at 60 s), the arms
    n.check_store()
    n.check_store()
    assert "v4-32k-a 7 running, 3 waiting, KV 12%; coder-6b-b no fresh metrics for 12 s (" in lines[3]
    assert lines[3].endswith(f"{APP}/fleet?window=15m")
    assert "arms balanced vs seed-score" in lines[4] and "cost_per_request 1.17 vs 1.44" in lines[4]
    assert len(lines) == 5


def test_a_stale_instance_breaking_a_gauge_says_its_metrics_are_stale(config) -> None:
    """A crashed instance's KV reads 1.00 because its metrics are stale, not because its cache is full."""
    n, lines = narrator(config)
    n.check_state(state(0.2, False))
    stale = state(1.0, True)
    stale["instances"][0] |= {"stale": True, "age_s": 7.4}
    n.check_state(stale)
    assert len(lines) == 1
    assert ("coder-6b-a broke kv-cache (kv_cache_usage 1.00 <= 0.85 failed for 2 s; no fresh metrics for 7 s, so its "
            "gauges are taken toward full) -> out of the feasible set") in lines[0]


def test_an_unmeasured_error_rate_coming_back_in_says_so(config) -> None:
    n, lines = narrator(config)
    snap = {"instance": "coder-6b-b", "probes": []}
    for out, value in ((False, 0.0), (True, 0.25), (False, None)):
        snap["latches"] = [{"constraint": "error-rate", "out": out, "value": value}]
        n.check_state({"instances": [snap], "breakers": {"events": []}})
    assert len(lines) == 2, lines
    assert "coder-6b-b error_rate unmeasured (no requests to it) for 10 s -> back in the feasible set (error-rate)" \
        in lines[1]
