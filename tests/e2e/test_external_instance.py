"""A fleet mixing a self-hosted vLLM instance with a hosted API that has no /metrics (``engine: external``).

Real processes on loopback: one simulated vLLM instance (``sim fleet``), one plain OpenAI-compatible
server without ``/metrics`` (the small aiohttp app below, standing in for a provider's API), and a
gateway over both. Requests go through the official ``openai`` client. The external instance gets
traffic, its trace candidates show it feasible (not failing open), a rule that targets only it
works, the gateway never asks it for metrics, and the fleet grid shows it as not scraped rather
than stale.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from app.run.procs import free_ports
from app.ui.data import fleet as grid_data
from app.ui.limits import Limits
from tests.e2e.conftest import Proc

pytestmark = pytest.mark.e2e

# A provider's chat completions, and nothing else: /metrics (and everything but /count) is a 404.
HOSTED = """
import json, sys
from aiohttp import web

seen = {"chat": 0, "other": 0}

async def chat(request):
    body = await request.json()
    seen["chat"] += 1
    return web.json_response({
        "id": f"chatcmpl-{seen['chat']}", "object": "chat.completion", "created": 1700000000,
        "model": body.get("model", "hosted"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hosted answer"},
                     "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}})

async def count(_):
    return web.json_response(seen)

@web.middleware
async def tally(request, handler):
    if request.path not in ("/v1/chat/completions", "/count"):
        seen["other"] += 1
    return await handler(request)

app = web.Application(middlewares=[tally])
app.router.add_post("/v1/chat/completions", chat)
app.router.add_get("/count", count)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=lambda *_: print("hosted ready", flush=True))
"""

POLICY = """
routing_matrix:
  - rule_name: overflow
    condition: "prompt_contains('overflow')"
    primary_target: hosted
"""


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _trace(gateway: str, request_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        try:
            found: dict[str, Any] = _get(f"{gateway}/v1/traces/{request_id}")
            return found
        except urllib.error.HTTPError as exc:
            exc.close()
            assert time.monotonic() < deadline, "the trace was never stored"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp = tmp_path_factory.mktemp("external")
    local_port, hosted_port, gw = free_ports(3)
    local = {"id": "local-a", "model": "local", "url": f"http://127.0.0.1:{local_port}"}
    hosted = {"id": "hosted-a", "model": "hosted", "url": f"http://127.0.0.1:{hosted_port}", "engine": "external"}
    (tmp / "policy.yaml").write_text(POLICY)
    base = {
        "gateway": {"host": "127.0.0.1", "port": gw},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 20},
        "scrape": {"interval_s": 0.2, "timeout_s": 0.5},
        "sim": {"time_scale": 20, "seed": 1},
        "probes": {"enabled": False},
    }
    (tmp / "fleet.yaml").write_text(yaml.safe_dump({**base, "fleet": {"instances": [local]}}))
    (tmp / "c.yaml").write_text(yaml.safe_dump({**base, "fleet": {"instances": [local, hosted]},
                                                "routing": {"policy": str(tmp / "policy.yaml")}}))
    py = [sys.executable, "-m", "app"]
    procs = [Proc([*py, "sim", "fleet", "--config", str(tmp / "fleet.yaml")]),
             Proc([sys.executable, "-c", HOSTED, str(hosted_port)])]
    try:
        procs[0].wait_for("fleet ready")
        procs[1].wait_for("hosted ready")
        procs.append(Proc([*py, "serve", "--config", str(tmp / "c.yaml"), "--workers", "1"]))
        procs[2].wait_for("gateway ready")
        yield f"http://127.0.0.1:{gw}", f"http://127.0.0.1:{hosted_port}"
    finally:
        for p in reversed(procs):
            p.stop()


def _ask(gateway: str, model: str, prompt: str) -> tuple[str, str]:
    from openai import OpenAI

    with OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=[{"role": "user", "content": prompt}], max_tokens=8)
    answer = raw.parse().choices[0].message.content or ""
    return raw.headers["x-request-id"], answer


def _candidate(trace: dict[str, Any], instance: str) -> dict[str, Any]:
    return next(c for c in trace["candidates"] if c["instance"] == instance)


def test_the_hosted_instance_takes_traffic_as_a_feasible_candidate(stack: tuple[str, str]) -> None:
    gateway, hosted = stack
    before = _get(f"{hosted}/count")["chat"]
    request_id, answer = _ask(gateway, "hosted", "hello there")
    assert answer == "hosted answer" and _get(f"{hosted}/count")["chat"] == before + 1
    trace = _trace(gateway, request_id)
    cand = _candidate(trace, "hosted-a")
    assert cand["feasible"] and cand["violations"] == [], cand
    assert trace["selected_instance"] == "hosted-a" and trace["mode"] == "normal" and not trace["fallback_triggered"]
    assert cand["state"]["engine"] == "external" and cand["state"]["age_s"] is None and not cand["state"]["stale"]

    # Both models on the table: the hosted one is a feasible candidate beside the vLLM one.
    request_id, _ = _ask(gateway, "auto", "what is the capital of France?")
    trace = _trace(gateway, request_id)
    assert _candidate(trace, "hosted-a")["feasible"] and _candidate(trace, "local-a")["feasible"], trace["candidates"]


def test_a_rule_targeting_only_the_hosted_model_routes_there(stack: tuple[str, str]) -> None:
    gateway, hosted = stack
    before = _get(f"{hosted}/count")["chat"]
    request_id, answer = _ask(gateway, "auto", "this is overflow traffic")
    trace = _trace(gateway, request_id)
    assert trace["rule"] == "overflow" and trace["selected_instance"] == "hosted-a", trace
    assert trace["mode"] == "normal" and answer == "hosted answer"
    assert _get(f"{hosted}/count")["chat"] == before + 1


def test_it_is_never_scraped_and_shows_as_not_scraped(stack: tuple[str, str]) -> None:
    gateway, hosted = stack
    time.sleep(1.0)  # several scrape rounds (every 0.2 s)
    assert _get(f"{hosted}/count")["other"] == 0  # no GET /metrics, ever
    state = _get(f"{gateway}/v1/router/state")
    assert state["scrape"]["failing"] == {}
    snaps = grid_data.live_snapshots(state)
    shown = {s.instance: s for s in snaps}["hosted-a"]
    assert (shown.engine, shown.scraped_at, shown.stale, shown.kv_cache_usage) == ("external", None, False, None)
    grid = grid_data.cells(snaps, Limits(constraints=())).set_index("instance")
    assert grid.loc["hosted-a", "status"] != "grey" and grid_data.NOT_SCRAPED in grid.loc["hosted-a", "label"]
    table = grid_data.table(grid.reset_index()).set_index("instance")
    assert table.loc["hosted-a", "state age"] == "not scraped (external)"
    assert table.loc["local-a", "state age"] != "not scraped (external)"
