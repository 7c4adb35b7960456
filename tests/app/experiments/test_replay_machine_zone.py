"""``routelens replay --verify --db FILE`` reproduces every decision whatever the machine's time zone.

Gateway traffic across New York's two DST changes (its wall clock injected), profiles on UTC hours,
rules on New York hours, stored in a DuckDB file, then verified by the CLI in a process whose ``TZ``
is New York or Kolkata. Before, the file's times were read in the machine's zone: the UTC
profile was chosen by the New York hour and a state's age came out an hour off across a DST
change (of these 10, 2 reproduced under New York, 6 under Kolkata).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from ingest.duckdb.store import DuckDBTraceStore
from router_core.config_file import read_config
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply, upstream

ROOT = Path(__file__).resolve().parents[3]
RULES = """
timezone: America/New_York
routing_matrix:
  - rule_name: one-am
    condition: "request_time.hour == 1"
    primary_target: small
  - rule_name: sunday
    condition: "request_time.weekday == 6"
    primary_target: big
"""
# Around 2026-03-08 07:00 UTC and 2026-11-01 06:00 UTC (New York's changes), and at UTC hours whose
# New York hour falls elsewhere in the profiles (03:00 UTC is 23:00 in New York).
TIMES = [datetime(2026, 3, 8, 5, 30, tzinfo=UTC), datetime(2026, 3, 8, 6, 30, tzinfo=UTC),
         datetime(2026, 3, 8, 7, 0, tzinfo=UTC), datetime(2026, 3, 8, 7, 30, tzinfo=UTC),
         datetime(2026, 6, 3, 3, 0, tzinfo=UTC), datetime(2026, 6, 3, 12, 0, tzinfo=UTC),
         datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 1, 6, 30, tzinfo=UTC),
         datetime(2026, 11, 1, 7, 30, tzinfo=UTC), datetime(2026, 11, 2, 5, 0, tzinfo=UTC)]


async def traffic(tmp: Path) -> MemoryHooks:
    now = [TIMES[0]]
    servers = {"big-a": TestServer(upstream(reply(200), 0.2)), "small-a": TestServer(upstream(reply(200), 0.3))}
    for server in servers.values():
        await server.start_server()
    fleet = "\n".join(f'    - {{id: {iid}, model: {iid.split("-")[0]}, url: "{str(s.make_url("")).rstrip("/")}"}}'
                      for iid, s in servers.items())
    (tmp / "rules.yaml").write_text(RULES)
    (tmp / "routelens.yaml").write_text(f"""
fleet:
  instances:
{fleet}
scrape: {{interval_s: 60}}
routing: {{policy: rules.yaml, timezone: America/New_York, peak_hours: [[1, 3]]}}
scoring:
  preset: balanced
  profiles:
    - {{name: night, hours: [0, 6], weights: {{quality: 1.0, latency: 0.0}}}}
""")
    config = read_config(tmp / "routelens.yaml")
    hooks = MemoryHooks()
    gateway = Gateway(config, build_router(config), hooks, wall=lambda: now[0])
    try:
        async with TestClient(TestServer(gateway.build_app())) as client:
            for at in TIMES:
                now[0] = at
                body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
                resp = await client.post("/v1/chat/completions", json=body)
                assert resp.status == 200, await resp.text()
            for _ in range(3):
                await asyncio.sleep(0)
    finally:
        for server in servers.values():
            await server.close()
    return hooks


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("zones")
    hooks = asyncio.run(traffic(tmp))
    traces = sorted(hooks.traces.values(), key=lambda t: t.ts)
    assert [t.ts for t in traces] == TIMES
    profiles = {t.ts.hour: {s.reason for s in t.decision_trace if s.step.startswith("score/")} for t in traces}
    assert all("(night)" in r for h, reasons in profiles.items() if h < 6 for r in reasons)  # UTC hours
    assert not any("(night)" in r for h, reasons in profiles.items() if h >= 6 for r in reasons)
    store = DuckDBTraceStore(tmp / "t.duckdb")
    try:
        store.write_records([*hooks.policies.values(), *traces])
    finally:
        store.close()
    return tmp / "t.duckdb"


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Kolkata", "UTC"])
def test_verify_reproduces_every_decision_under_any_machine_zone(db: Path, zone: str) -> None:
    argv = ["replay", "--config", str(db.parent / "routelens.yaml"), "--verify", "--db", str(db), "--since",
            "2026-01-01", "--until", "2027-01-01", "--json", "--quiet", "--no-progress", "--workers", "1"]
    done = subprocess.run([sys.executable, "-m", "app", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "TZ": zone})
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["n"], report["reproduced"], report["mismatches"]) == (len(TIMES), len(TIMES), []), done.stderr
    assert done.returncode == 0, done.stderr
