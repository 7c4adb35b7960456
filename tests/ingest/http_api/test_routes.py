"""The intake and the query API over real HTTP on 127.0.0.1 (aiohttp server and client)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
import pytest
from aiohttp import web

from bench.synthetic import T0, TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.http_api.routes import IngestApi
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from schemas.config.storage import SpoolSettings, StorageSettings
from schemas.feedback import Feedback
from schemas.trace import DecisionTrace

Call = Callable[..., Awaitable[tuple[int, Any]]]


def serve(tmp_path: Path, check: Callable[[Call, TraceEmitter, DuckDBTraceStore], Awaitable[None]],
          token: str | None = None, *, started: bool = True) -> None:
    """Run ``check`` against the API on 127.0.0.1; ``started=False`` keeps every emitted record pending."""
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    st = StorageSettings(batch_size=64, flush_interval_ms=5, spool=SpoolSettings(max_record_bytes=16 * 1024))
    quarantine = Quarantine(tmp_path / "q", clock=lambda: T0)
    em = TraceEmitter(store, st, spool_dir=tmp_path / "spool", quarantine=quarantine)
    if started:
        em.start()

    async def main() -> None:
        app = web.Application()
        IngestApi(em, store, token=token, max_body=1 << 20).add_routes(app)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        async with aiohttp.ClientSession() as session:
            async def call(method: str, path: str, body: bytes | None = None,
                           headers: dict[str, str] | None = None) -> tuple[int, Any]:
                async with session.request(method, f"http://127.0.0.1:{port}{path}", data=body,
                                           headers=headers) as resp:
                    return resp.status, orjson.loads(await resp.read())

            try:
                await check(call, em, store)
            finally:
                await runner.cleanup()

    try:
        asyncio.run(main())
    finally:
        em.close()


def ndjson(*items: Any) -> bytes:
    return b"\n".join(i if isinstance(i, bytes) else orjson.dumps(i) for i in items)


def test_each_line_is_judged_on_its_own(tmp_path: Path, factory: TraceFactory) -> None:
    good = [factory.trace() for _ in range(3)]
    evil = factory.trace(request_id="req_x'); DROP TABLE traces; --")
    wrong_type = {**orjson.loads(good[0].model_dump_json()), "request_id": "req_wt", "latency_ms": "fast"}
    unknown = {**orjson.loads(good[1].model_dump_json()), "request_id": "req_unk", "prompt": "合同第3条的违约责任"}
    huge = {**orjson.loads(good[2].model_dump_json()), "request_id": "req_big", "rule": "r" * 20_000}
    body = ndjson(good[0].model_dump_json().encode(), b"{not json", wrong_type, good[1].model_dump_json().encode(),
                  unknown, huge, [1, 2], evil.model_dump_json().encode(), good[2].model_dump_json().encode())

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        status, out = await call("POST", "/v1/traces", body, {"Content-Type": "application/x-ndjson"})
        assert status == 207 and out["accepted"] == 4 and out["rejected"] == 5, out["results"]["rejected"]
        reasons = {r["line"]: r["reason"] for r in out["results"]["rejected"]}
        assert reasons[2].startswith("malformed JSON")
        assert "latency_ms" in reasons[3] and "prompt: Extra inputs are not permitted" in reasons[5]
        assert "exceeds the limit" in reasons[6] and "JSON object" in reasons[7]
        assert "违约" not in orjson.dumps(out).decode()  # a reason never echoes the input
        assert em.flush(10)
        assert store.get(evil.request_id) == evil and store.count() == 4
        q = store.quarantined(T0, T0 + timedelta(seconds=1))  # stamped by the injected clock
        assert sorted(r.line for r in q if r.line) == [2, 3, 5, 6, 7]
        unk = next(r for r in q if r.line == 5)
        assert unk.raw is not None and "违约" not in unk.raw and '"prompt":"[redacted]"' in unk.raw
        assert "违约" not in "".join(p.read_text() for p in (tmp_path / "q").glob("*.jsonl"))

    serve(tmp_path, check)


def test_a_json_array_and_the_bearer_token(tmp_path: Path, factory: TraceFactory) -> None:
    traces = [factory.trace() for _ in range(4)]
    body = orjson.dumps([orjson.loads(t.model_dump_json()) for t in traces])

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        assert (await call("POST", "/v1/traces", body))[0] == 401
        assert (await call("POST", "/v1/traces", body, {"Authorization": "Bearer wrong"}))[0] == 401
        status, out = await call("POST", "/v1/traces", body, {"Authorization": "Bearer s3cret"})
        assert status == 200 and out["accepted"] == 4
        assert [a["request_id"] for a in out["results"]["accepted"]] == [t.request_id for t in traces]
        status, out = await call("POST", "/v1/traces", b"[{]", {"Authorization": "Bearer s3cret"})
        assert status == 422 and out["rejected"] == 1

    serve(tmp_path, check, token="s3cret")


def test_the_query_api_over_http(tmp_path: Path, factory: TraceFactory) -> None:
    traces = [factory.trace() for _ in range(12)]
    start = traces[0].ts.isoformat().replace("+00:00", "Z")

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        store.write_records(traces)
        status, page = await call("GET", f"/v1/traces?limit=5&start={start}")
        assert status == 200 and len(page["items"]) == 5 and page["next_cursor"]
        status, rest = await call("GET", f"/v1/traces?limit=100&cursor={page['next_cursor']}")
        got = [i["request_id"] for i in page["items"] + rest["items"]]
        assert got == [t.request_id for t in sorted(traces, key=lambda t: t.ts, reverse=True)]
        status, aggs = await call("GET", f"/v1/analytics/buckets?bucket=1h&start={start}&end=2030-01-01T00:00:00Z")
        assert status == 200 and sum(b["requests"] for b in aggs["buckets"]) == 12
        status, traffic = await call("GET", "/v1/analytics/traffic?rule=auto")
        assert status == 200 and sum(e["requests"] for e in traffic["edges"]) == sum(t.rule == "auto" for t in traces)
        status, snaps = await call("GET", f"/v1/snapshots?start={start}&end=2030-01-01T00:00:00Z")
        assert status == 200 and len(snaps["snapshots"]) == 4 * 3
        for path, param in (("/v1/traces?fallback=maybe", "fallback"), ("/v1/traces?limit=0", "limit"),
                            ("/v1/traces?start=yesterday", "start"), ("/v1/probes?start=2026-01-01T00:00:00", "start"),
                            ("/v1/probes?start=2026-01-01T00:00:00Z&end=2026-01-02T00:00:00Z&kind=ping", "kind"),
                            ("/v1/traces?cursor=xyz", "cursor"), ("/v1/analytics/buckets?bucket=1h", "start"),
                            ("/v1/traces?min_latency_ms=fast", "min_latency_ms"),
                            ("/v1/traces?max_latency_ms=-1", "max_latency_ms"),
                            ("/v1/analytics/traffic?min_latency_ms=" + quote("1' OR '1'='1"), "min_latency_ms"),
                            ("/v1/analytics/buckets?bucket=1h&start=2026-01-01T00:00:00Z&end=2030-01-01T00:00:00Z"
                             "&max_latency_ms=nan", "max_latency_ms"),
                            ("/v1/analytics/constraints?max_latency_ms=" + "9" * 5_000 + "x", "max_latency_ms"),
                            ("/v1/analytics/constraints?start=noon", "start"),
                            ("/v1/analytics/misroutes?limit=5000", "limit"),
                            ("/v1/analytics/misroutes?min_latency_ms=%E5%BF%AB", "min_latency_ms")):
            status, err = await call("GET", path)
            assert status == 400 and err["error"]["param"] == param, path
        status, found = await call("GET", "/v1/traces?model=" + quote("x' OR 1=1 --"))  # only ever a parameter
        assert status == 200 and found["items"] == [] and store.count() == 12
        slow = [t for t in traces if t.outcome.total_ms >= 500.0]
        status, page = await call("GET", "/v1/traces?limit=100&min_latency_ms=500")
        assert status == 200 and {i["request_id"] for i in page["items"]} == {t.request_id for t in slow}
        status, out = await call("GET", "/v1/analytics/constraints?min_latency_ms=0&max_latency_ms=1e9")
        removed = sum(not c.feasible for t in traces for c in t.candidates)
        assert status == 200 and sum(s["removed"] for s in out["constraints"]) == removed
        assert set(out["constraints"][0]) == {"constraint", "instance", "model", "removed", "decisive", "undecided",
                                              "soft"}
        store.write_records([Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=1), correct=False,
                                      expected_model="qwen-72b") for t in traces[:3]])
        status, out = await call("GET", "/v1/analytics/misroutes?limit=2")
        assert status == 200 and [m["request_id"] for m in out["misroutes"]] == [t.request_id for t in traces[2:0:-1]]
        assert out["misroutes"][0]["expected_model"] == "qwen-72b" and out["misroutes"][0]["trace_ts"]
        status, out = await call("GET", "/v1/analytics/misroutes?rule=" + quote("'; DROP TABLE feedback; --"))
        assert status == 200 and out["misroutes"] == []

    serve(tmp_path, check)


def test_one_trace_by_id_stored_or_still_pending(tmp_path: Path, factory: TraceFactory) -> None:
    stored, pending = factory.trace(request_id="req_x'; --"), factory.trace()

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        store.write_records([stored])
        assert em.emit(pending)  # the batcher is not running: only the emitter holds it
        assert store.get(pending.request_id) is None
        for trace in (stored, pending):
            status, body = await call("GET", "/v1/traces/" + quote(trace.request_id, safe=""))
            assert status == 200 and DecisionTrace.model_validate(body) == trace

    serve(tmp_path, check, started=False)


def test_a_lookup_looks_again_when_the_write_that_held_the_trace_ends_between_its_looks(factory: TraceFactory) -> None:
    # A relayed trace waits in the store's spool, not as a pending trace. The first look misses it;
    # by the time the lookup asks what waits, the write holding it has ended: nothing waits, and the
    # trace is stored. (Before, that lookup answered 404: seen once as a drill's lost feedback.)
    trace = factory.trace()

    class Store:
        looks = 0

        def get(self, request_id: str) -> DecisionTrace | None:
            self.looks += 1
            return trace if self.looks > 1 and request_id == trace.request_id else None

    class Emitter:
        def pending(self, request_id: str) -> None:
            return None

        def backlog_size(self) -> int:
            return 0

        def flush(self, timeout_s: float) -> bool:
            raise AssertionError("nothing waits: nothing to write")

    api = IngestApi(Emitter(), Store())  # type: ignore[arg-type]
    assert api._lookup(trace.request_id) == trace
    assert api._lookup("req-missing") is None


def test_an_unknown_trace_id_is_the_openai_shaped_404(tmp_path: Path) -> None:
    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        status, body = await call("GET", "/v1/traces/req-missing")
        assert status == 404
        assert body == {"error": {"message": "no trace for request_id 'req-missing'", "type": "invalid_request_error",
                                  "param": None, "code": "trace_not_found"}}

    serve(tmp_path, check)


@pytest.mark.parametrize("body", [b"", b"   \n"])
def test_an_empty_body_is_a_clear_error(tmp_path: Path, body: bytes) -> None:
    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        status, out = await call("POST", "/v1/traces", body)
        assert status == 400 and out["error"]["code"] == "empty_body"

    serve(tmp_path, check)


def test_a_window_s_bounds_are_named_when_wrong(tmp_path: Path) -> None:
    """Without start/end the buckets named ``bucket``; a naive start was ``query`` with ``<record>:``; end before
    start was a 200 with nothing in it (the API audit)."""
    late, early = "2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z"

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        cases = [("/v1/analytics/buckets", "start"), (f"/v1/analytics/buckets?start={early}", "end"),
                 (f"/v1/analytics/buckets?start={late}&end={early}", "end"),
                 (f"/v1/traces?start={late}&end={early}", "end"),
                 ("/v1/traces?start=2026-01-01T00:00:00", "start"),
                 ("/v1/analytics/traffic?end=2026-01-01T00:00", "end")]
        for path, param in cases:
            status, body = await call("GET", path)
            assert status == 400 and body["error"]["param"] == param, (path, body)
            assert "<record>" not in body["error"]["message"], body
        status, _ = await call("GET", f"/v1/traces?start={early}&end={early}")  # an empty window is no error
        assert status == 200

    serve(tmp_path, check)
