"""Issue 31's measurement as a test: traffic through a gateway with two rules, softmax and affinity, replayed.

Before, ``routelens replay`` under the very config the gateway ran flipped 39.6% of such traffic
(the rules were never given to the router). Now the range replay under the same config flips none,
and ``replay --verify`` reproduces every decision under the policy stored with the traces.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from app.experiments.replay_range import replay_range
from app.experiments.verify import verify_range
from ingest.duckdb.store import DuckDBTraceStore
from router_core.config_file import read_config
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from schemas.queries import TraceFilter
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply, upstream

RULES = """
routing_matrix:
  - rule_name: long-to-big
    condition: "input_length > 40"
    primary_target: big
    fallback_chain: [small]
  - rule_name: code-to-small
    condition: "prompt_contains('code')"
    primary_target: small
"""
PROMPTS = ["hi", "write some code please", "a long question " * 20, "what is the capital of France?"]


async def traffic(tmp_path: Path, n: int) -> tuple[MemoryHooks, Path]:
    kv = {"big-a": 0.2, "big-b": 0.4, "small-a": 0.3, "small-b": 0.1}
    servers = {iid: TestServer(upstream(reply(200), load)) for iid, load in kv.items()}
    for server in servers.values():
        await server.start_server()
    fleet = "\n".join(f'    - {{id: {iid}, model: {iid.split("-")[0]}, url: "{str(s.make_url("")).rstrip("/")}"}}'
                      for iid, s in servers.items())
    (tmp_path / "rules.yaml").write_text(RULES)
    (tmp_path / "routelens.yaml").write_text(f"""
fleet:
  instances:
{fleet}
scrape: {{interval_s: 60}}
router: {{picker: softmax, softmax_temperature: 0.05}}
routing: {{policy: rules.yaml}}
economics: {{affinity: {{header: x-session}}}}
""")
    config = read_config(tmp_path / "routelens.yaml")
    hooks = MemoryHooks()
    gateway = Gateway(config, build_router(config), hooks)
    async with TestClient(TestServer(gateway.build_app())) as client:
        for i in range(n):
            body = {"model": "auto", "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]}
            headers = {"x-session": f"s{i % 17}"} if i % 3 else {}
            resp = await client.post("/v1/chat/completions", json=body, headers=headers)
            assert resp.status == 200, await resp.text()
        for _ in range(3):
            await asyncio.sleep(0)
    for server in servers.values():
        await server.close()
    return hooks, tmp_path / "routelens.yaml"


def test_replaying_gateway_traffic_under_its_own_config_flips_nothing(tmp_path: Path) -> None:
    hooks, config_path = asyncio.run(traffic(tmp_path, 240))
    traces: list[Any] = list(hooks.traces.values())
    assert len(traces) == 240
    rules = {t.rule for t in traces}
    assert {"long-to-big", "code-to-small"} <= rules and any(t.inputs and t.inputs.affinity for t in traces)
    assert any(t.selection_probability is not None and t.selection_probability < 1 for t in traces)  # softmax
    db = tmp_path / "t.duckdb"
    store = DuckDBTraceStore(db)
    store.write_records([*hooks.policies.values(), *traces])
    verified = verify_range(store, TraceFilter())
    store.close()
    assert verified.n == 240 and verified.reproduced == 240, verified
    since = min(t.ts for t in traces)
    report = replay_range(db, since, max(t.ts for t in traces) + timedelta(seconds=1), TraceFilter(),
                          read_config(config_path))
    assert report.n == 240 and report.replayed == 240 and report.flips == 0, report.causes
