"""The narrator's day: its summary counts what the store counts, its lines say what happened, its links answer.

The audit of a first run (``routelens demo --no-app``) found a summary that counted fewer misroutes
than ``GET /v1/analytics/misroutes``, a rule line routing to ``None``, a latch line whose value
passed the test it said failed, a burst read as 13% of the cache where the script took it to 95%,
and links to API routes that answered 400.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import urlsplit
from urllib.request import urlopen

import pytest
from aiohttp import web

from app.config import load_config
from app.run.narrator import Narrator
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.http_api.routes import IngestApi
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from schemas.config import RouteLensConfig
from schemas.config.storage import StorageSettings
from sim.day import Injected
from sim.faults import FaultSpec
from sim.traffic import TrafficResult
from tests.serve_thread import in_thread

ROOT = Path(__file__).resolve().parents[3]
NOON = datetime(2026, 12, 4, 12, tzinfo=UTC)
GATEWAY_ONLY = {"/v1/router/state", "/v1/alerts", "/v1/probes/verdicts"}  # the gateway's own, without parameters


@pytest.fixture(scope="module")
def config() -> RouteLensConfig:
    return load_config(ROOT / "routelens.yaml")


class Clock:
    def __init__(self) -> None:
        self.now = NOON

    def __call__(self) -> datetime:
        return self.now


class FakeStore:
    """The store's answers as the narrator reads them; ``degraded``: the rule's trace was answered by no instance."""

    def __init__(self, *, degraded: bool = False, edges: list[dict[str, Any]] | None = None) -> None:
        self.degraded, self.edges = degraded, edges or []

    def get_json(self, path: str) -> Any:
        if path.startswith("/v1/traces?"):
            if self.degraded:
                return {"items": [{"request_id": "r9", "selected_model": None, "http_status": 200}]}
            return {"items": [{"request_id": "r8", "selected_model": None, "http_status": 200},
                              {"request_id": "r9", "selected_model": "deepseek-v4-32k", "http_status": 200}]}
        if path == "/v1/traces/r9":  # two attempts failed; the chain's end answered
            return {"attempts": [{"model": "deepseek-v4-32k"}, {"model": "deepseek-coder-6b-fp16"}],
                    "policy": {"chain_used": ["deepseek-v4-32k", "deepseek-coder-6b-fp16", "legacy-rule-engine"]},
                    "shadow": {"router_version": "rc1", "selected_instance": "coder-6b-b", "flipped": True}}
        if path.startswith("/v1/traces/"):
            return {"shadow": {"router_version": "rc1", "selected_instance": "coder-6b-b", "flipped": True}}
        if path.startswith("/v1/analytics/traffic"):
            return {"edges": self.edges}
        if path.startswith("/v1/analytics/compare"):
            return {"n_a": 2, "n_b": 3, "metrics": {}}
        raise AssertionError(path)


def narrator(config: RouteLensConfig, store: FakeStore, *, app: str | None = "http://127.0.0.1:8501",
             gateway: str = "http://127.0.0.1:8080") -> tuple[Narrator, list[str], Clock]:
    lines: list[str] = []
    clock = Clock()
    n = Narrator(config, gateway, app, day_s=240, say=lines.append, now=clock)
    n._api = store
    return n, lines, clock


def result(rid: str, *, status: str = "ok", grade: str | None = "correct", feedback: int | None = 202,
           model: str | None = "deepseek-v4-32k") -> TrafficResult:
    return TrafficResult(index=0, cls="code", lang="en", query_hash="sha256:0", status=status,  # type: ignore[arg-type]
                         http_status=200 if status == "ok" else 503, latency_ms=1.0, request_id=rid,
                         model=model if status == "ok" else None, grade=grade if status == "ok" else None,
                         expected_model="deepseek-coder-6b-fp16", feedback_status=feedback)


def test_the_day_summary_counts_every_correct_false_verdict_and_says_the_errors(config) -> None:
    """docs/operators.md: a misroute is any verdict correct=false; the day posts one on an error too."""
    edges = [{"rule": "long_context_priority", "requests": 1}, {"rule": "auto", "requests": 4}]
    n, lines, clock = narrator(config, FakeStore(edges=edges))
    n.on_day(0)
    for r in (result("r1"), result("r2", grade="wrong"), result("r3", status="error"),
              result("r4", status="error", feedback=None),  # no verdict was taken: no misroute
              result("r5", grade="wrong", feedback=409)):  # refused (a second verdict): not this one's
        n.on_result(r)
    clock.now += timedelta(minutes=4)
    n.on_day(1)
    summary = next(line for line in lines if " day 1 over: " in line)
    assert "day 1 over: 5 requests (2 errors), 1 (20%) routed by a rule of the policy, 2 marked misroutes " \
           "by feedback" in summary, summary


def test_a_rule_line_shows_a_trace_a_model_answered(config) -> None:
    n, lines, _ = narrator(config, FakeStore())
    n.check_state({"instances": [], "policy": {"rules": [{"name": "long_context_priority"}]}})
    n.check_store()
    assert "rule long_context_priority routes r9 to deepseek-v4-32k (the policy, before any scoring)" in lines[0]


def test_a_rule_line_answered_by_the_chains_degraded_end_names_it(config) -> None:
    n, lines, _ = narrator(config, FakeStore(degraded=True))
    n.check_state({"instances": [], "policy": {"rules": [{"name": "long_context_priority"}]}})
    n.check_store()
    assert ("rule long_context_priority routes r9 to legacy-rule-engine (the policy, before any scoring; no instance "
            "answered, so its chain's degraded end did)") in lines[0], lines
    assert "None" not in lines[0]


def test_a_latch_read_after_its_spike_does_not_show_that_value_as_the_one_that_failed(config) -> None:
    """The queue broke 10 for 2 s; by the poll that saw the latch out it read 0: not ``queue 0.00 <= 10 failed``."""
    n, lines, _ = narrator(config, FakeStore())
    snap: dict[str, Any] = {"instance": "v4-32k-b", "probes": []}
    for out, value in ((False, 0.0), (True, 0.0), (False, 0.0), (False, 3.0), (True, 14.0)):
        snap["latches"] = [{"constraint": "queue", "out": out, "value": value}]
        n.check_state({"instances": [snap], "breakers": {"events": []}})
    broke = [line for line in lines if "broke queue" in line]
    assert len(broke) == 2, lines
    assert "v4-32k-b broke queue (queue <= 10 failed for 2 s; 0.00 when read) -> out" in broke[0], broke[0]
    assert "v4-32k-b broke queue (queue 14.00 <= 10 failed for 2 s) -> out" in broke[1], broke[1]


def pressure(rate: float, duration_s: float) -> Injected:
    return Injected(0, "coder-6b-a", FaultSpec(kind="kv-pressure", rate=rate, period_s=10, duration_s=duration_s),
                    {"id": "f"})


def test_a_burst_on_top_of_the_batch_job_is_said_as_the_share_both_hold(config) -> None:
    """demo_day.yaml: 82% from 100 s for 70 s, a burst of 13% more from 110 s: 95% (the simulator adds them)."""
    n, lines, clock = narrator(config, FakeStore())
    n.on_inject(pressure(0.82, 70))
    clock.now += timedelta(seconds=10)
    n.on_inject(pressure(0.13, 25))
    clock.now += timedelta(seconds=70)  # both over: the next day's batch job is said alone
    n.on_inject(pressure(0.82, 70))
    assert "a neighbour's batch job takes up to 82% of coder-6b-a's KV cache for 70 s" in lines[0]
    assert "a burst takes another 13% of coder-6b-a's KV cache on top of the batch job (95% in all) for 25 s" \
        in lines[1], lines[1]
    assert "a neighbour's batch job takes up to 82% of coder-6b-a's KV cache for 70 s" in lines[2]


@pytest.fixture
def store_api(tmp_path: Path) -> Iterator[tuple[str, DuckDBTraceStore]]:
    """The store's read API (what the gateway serves for it) over a real DuckDB file on 127.0.0.1."""
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    em = TraceEmitter(store, StorageSettings(batch_size=64, flush_interval_ms=5), spool_dir=tmp_path / "spool",
                      quarantine=Quarantine(tmp_path / "q", clock=lambda: NOON))
    em.start()
    app = web.Application()
    IngestApi(em, store, token=None, max_body=1 << 20).add_routes(app)
    try:
        with in_thread(app) as url:
            yield url, store
    finally:
        em.close()


def status_of(url: str) -> int:
    try:
        with urlopen(url, timeout=10) as resp:
            return int(resp.status)
    except HTTPError as exc:
        with exc:
            return exc.code


def test_without_the_app_every_store_route_a_line_names_answers_200(config, store_api) -> None:
    """``day 1 begins`` linked ``/v1/analytics/buckets`` with no window: 400 ``start is required``."""
    url, store = store_api
    factory = TraceFactory(seed=3, n_candidates=2, start=NOON)
    store.write_records([factory.trace(request_id=rid) for rid in ("r1", "r2", "r9")])
    n, lines, clock = narrator(config, FakeStore(), app=None, gateway=url)
    n.on_day(0)
    n.on_inject(Injected(0, "coder-6b-b", FaultSpec(kind="crash", duration_s=20), {"id": "f1"}))
    n.on_result(result("r1"))
    n.on_result(result("r2", grade="wrong"))
    snap = {"instance": "coder-6b-a", "latches": [{"constraint": "kv-cache", "out": True, "value": 0.93}],
            "probes": [{"kind": "semantic", "verdict": "ok"}]}
    policy = {"rules": [{"name": "long_context_priority"}]}
    n.check_state({"instances": [snap], "policy": policy,
                   "breakers": {"events": [{"event_id": "e", "instance": "coder-6b-b",
                                            "message": "instance breaker coder-6b-b: closed -> open (x)"}]}})
    snap["probes"] = [{"kind": "semantic", "verdict": "failed", "reason": "drifted"}]
    n.check_state({"instances": [snap], "policy": policy})
    n.check_alerts([{"fingerprint": "f", "state": "firing", "name": "A", "instance": "coder-6b-a"}])
    n.check_store()
    clock.now += timedelta(minutes=2)
    n.check_store()  # the peak and the arms at noon
    clock.now += timedelta(minutes=2)
    n.on_day(1)  # the day's summary
    links = [line.rsplit(": ", 1)[1] for line in lines if line[:2].isdigit()]
    paths = {urlsplit(link).path for link in links}
    assert {"/v1/analytics/buckets", "/v1/analytics/constraints", "/v1/traces", "/v1/traces/r2",
            "/v1/analytics/compare", "/v1/analytics/traffic"} <= paths, paths
    assert all(link.startswith(url + "/v1/") for link in links), links
    answers = {link: status_of(link) for link in links if urlsplit(link).path not in GATEWAY_ONLY}
    assert set(answers.values()) == {200}, {k: v for k, v in answers.items() if v != 200}
