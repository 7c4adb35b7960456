"""Decisions in a real tracing backend: a running gateway exports its spans to Arize Phoenix (issue 34).

Phoenix runs on loopback from its own virtualenv (``make`` builds ``.venv-phoenix``; its
dependencies conflict with ours), with a working folder of its own. Requests go through a real
fleet and gateway with the official ``openai`` client, one of them carrying a client's
``traceparent``; the spans are read back through Phoenix's REST API and checked against each
request's decision trace: the tree, the attributes, the ids sent upstream (the simulated instance
reports the ``traceparent`` it received), and that no span carries the query text. A second
gateway exports to an endpoint where nothing listens: requests succeed, DuckDB holds every trace,
and the drop counter moves.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from app.run.procs import Child, free_port, free_ports, wait_http
from sim.behaviour import builtin_config
from tests.e2e.fleet_and_gateway import fleet_and_gateway

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
PHOENIX = Path(os.environ.get("ROUTELENS_PHOENIX", ROOT / ".venv-phoenix" / "bin" / "phoenix"))
CLIENT_TRACE, CLIENT_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
SECRET = "zebracorn"  # in every query: no span may carry it
QUERIES = [f"What does a credit score measure, {SECRET} {i}?" for i in range(3)] + \
          [f"Write a python function that reverses a list ({SECRET} code)"]
PUBLIC_URL = "https://routelens.example.com/app"


def get_json(url: str, timeout_s: float = 10) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read())


def stored_trace(gateway: str, request_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        try:
            return dict(get_json(f"{gateway}/v1/traces/{request_id}"))
        except urllib.error.HTTPError as exc:
            exc.close()
            assert time.monotonic() < deadline, f"the trace of {request_id} was never stored"
            time.sleep(0.2)


def config(tmp: Path, otel: dict[str, Any]) -> dict[str, Any]:
    """The built-in fleet of four behind a gateway with the seed 000 policy and the given ``otel`` section."""
    policy = Path(shutil.copy(ROOT / "policies" / "seed000.yaml", tmp / "policy.yaml"))
    *ports, gw = free_ports(5)
    base = builtin_config(4, 0, zero_delay=True)
    instances = [s.model_copy(update={"url": f"http://127.0.0.1:{p}", "kv_cache_bytes": 48 << 30})
                 for s, p in zip(base.fleet.instances, ports, strict=True)]
    cfg = base.model_dump(mode="json")
    cfg.update({
        "fleet": {"instances": [s.model_dump(mode="json") for s in instances]},
        "gateway": {"host": "127.0.0.1", "port": gw},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 20},
        "routing": {"policy": str(policy)},
        "probes": {"enabled": False},
        "otel": otel,
    })
    cfg["app"] = {**cfg.get("app", {}), "public_url": PUBLIC_URL}
    return cfg


def ask(gateway: str, query: str, headers: dict[str, str] | None = None) -> str:
    """One request through the official client; its request id."""
    from openai import OpenAI

    with OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": query}], max_tokens=8, extra_headers=headers or {})
    assert raw.http_response.status_code == 200
    return str(raw.headers["x-request-id"])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not PHOENIX.is_file():
        pytest.skip(f"Phoenix is not installed at {PHOENIX} (make builds .venv-phoenix)")
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = free_ports(2)
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_TELEMETRY_ENABLED": "false", "PYTHONUNBUFFERED": "1"}
    child = Child("phoenix", [str(PHOENIX), "serve"], env, None)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_http(f"{url}/healthz", 180, child.alive), child.tail()
        yield url
    finally:
        child.stop()


def phoenix_spans(phoenix: str, trace_ids: set[str], expected: int) -> list[dict[str, Any]]:
    """Every span of the given traces in Phoenix's default project, once ``expected`` of them have arrived."""
    deadline = time.monotonic() + 60
    while True:
        spans: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = get_json(f"{phoenix}/v1/projects/default/spans?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
            spans += page["data"]
            if not (cursor := page.get("next_cursor")):
                break
        mine = [s for s in spans if s["context"]["trace_id"] in trace_ids]
        if len(mine) >= expected or time.monotonic() > deadline:
            return mine
        time.sleep(0.5)


def test_phoenix_receives_each_decision_as_a_span_tree(phoenix: str, tmp_path: Path) -> None:
    cfg = config(tmp_path, {"enabled": True, "endpoint": phoenix, "sample_ratio": 1.0})
    with fleet_and_gateway(cfg, tmp_path) as gateway:
        ids = [ask(gateway, q) for q in QUERIES[:-1]]
        ids.append(ask(gateway, QUERIES[-1], {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01",
                                              "tracestate": "rojo=00f067aa0ba902b7"}))
        traces = {rid: stored_trace(gateway, rid) for rid in ids}
        seen = {inst["id"]: get_json(f"{inst['url']}/admin/traceparents") for inst in cfg["fleet"]["instances"]}
        expected = sum(2 + len(t["attempts"]) for t in traces.values())
        spans = phoenix_spans(phoenix, {t["otel_trace_id"] for t in traces.values()}, expected)

    assert len(spans) == expected, [s["name"] for s in spans]
    # no span, attribute or event carries a query's text: only its hash
    assert SECRET not in json.dumps(spans) and all(q not in json.dumps(spans) for q in QUERIES)
    by_id = {s["context"]["span_id"]: s for s in spans}
    client = traces[ids[-1]]
    assert client["otel_trace_id"] == CLIENT_TRACE and client["otel_parent_span_id"] == CLIENT_SPAN
    for rid, trace in traces.items():
        tree = [s for s in spans if s["context"]["trace_id"] == trace["otel_trace_id"]]
        request = by_id[trace["otel_span_id"]]
        assert request["parent_id"] == trace["otel_parent_span_id"]  # the client's span, or none
        attrs = request["attributes"]
        assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "auto"
        assert attrs["gen_ai.response.model"] == trace["selected_model"]
        assert attrs["gen_ai.usage.input_tokens"] == trace["outcome"]["prompt_tokens"]
        assert attrs["gen_ai.usage.output_tokens"] == trace["outcome"]["completion_tokens"]
        assert attrs["routelens.query_hash"] == trace["query_hash"]
        assert attrs["routelens.trace_url"] == f"{PUBLIC_URL}/trace?request_id={rid}"
        (decision,) = [s for s in tree if s["span_kind"] == "DECISION"]  # openinference.span.kind
        assert decision["parent_id"] == trace["otel_span_id"]
        d = decision["attributes"]
        for key, field in (("rule", "rule"), ("intent", "intent"), ("arm", "experiment_arm"),
                           ("router_version", "router_version"), ("policy_hash", "policy_hash"),
                           ("selected_instance", "selected_instance"), ("selected_model", "selected_model"),
                           ("mode", "mode"), ("fallback", "fallback_triggered")):
            key = f"routelens.{key}"
            assert d.get(key) == trace[field], (key, d.get(key), trace[field])
        assert d["routelens.rule"] is not None  # the seed policy matched a rule
        steps = [e["name"] for e in decision["events"] if not e["name"] == "eliminated"]
        assert steps == [s["step"] for s in trace["decision_trace"] if s["kind"] in
                         ("policy", "filter", "score", "pick", "fallback")]
        out = [e["attributes"] for e in decision["events"] if e["name"] == "eliminated"]
        assert len(out) == sum(max(1, len([v for v in c["violations"] if v["severity"] == "hard"]))
                               for c in trace["candidates"] if not c["feasible"])
        for e in out:
            assert {"routelens.candidate.instance", "routelens.reason"} <= set(e)
            if "routelens.constraint" in e:
                assert {"routelens.metric", "routelens.threshold"} <= set(e)
        attempts = [s for s in tree if s["name"].startswith("routelens.attempt")]
        attempts.sort(key=lambda s: s["attributes"]["routelens.attempt.seq"])
        assert [s["context"]["span_id"] for s in attempts] == [a["span_id"] for a in trace["attempts"]]
        assert all(s["parent_id"] == trace["otel_span_id"] for s in attempts)
        served = trace["attempts"][-1]
        assert seen[served["instance"]][rid] == f"00-{trace['otel_trace_id']}-{served['span_id']}-01"
    assert any(s["span_kind"] == "DECISION" and s["events"] for s in spans)


def test_receiver_down_requests_succeed_the_store_keeps_every_trace_and_drops_are_counted(tmp_path: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    cfg = config(tmp_path, {"enabled": True, "endpoint": nobody, "sample_ratio": 1.0, "timeout_s": 0.5})
    with fleet_and_gateway(cfg, tmp_path) as gateway:
        ids = [ask(gateway, q) for q in QUERIES]  # every one answered 200
        for rid in ids:
            stored_trace(gateway, rid)
        deadline, dropped = time.monotonic() + 60, 0.0
        while dropped == 0 and time.monotonic() < deadline:
            with urllib.request.urlopen(f"{gateway}/metrics", timeout=10) as resp:
                text = resp.read().decode()
            line = next(x for x in text.splitlines() if x.startswith("routelens_otel_spans_dropped_total"))
            dropped = float(line.split()[1])
            time.sleep(0.2)
        assert dropped > 0
        assert "routelens_otel_spans_exported_total 0.0" in text
    con = duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True)
    try:
        stored = {row[0] for row in con.execute("SELECT request_id FROM traces").fetchall()}
    finally:
        con.close()
    assert set(ids) <= stored
