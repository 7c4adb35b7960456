"""Test helpers shared by tests/app and tests/e2e: a stub read API (and the sample trace of tests/factories.py).

The stub is a real ``http.server`` on a loopback port serving ``GET /v1/traces/<id>`` the way
``routelens serve`` does: 200 with the trace JSON, 404 with the gateway's ``trace_not_found`` error
body for an unknown id. It also serves ``GET /v1/probes`` and ``GET /v1/events`` (filtered by
``start``/``end``/``instance``/``kind``, empty by default) and, when given, ``GET /v1/alerts`` and
``GET /v1/router/state`` (404 otherwise, as a server without them); ``sample_*`` build probe data.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from schemas import DecisionTrace, Feedback
from schemas.common import ProbeKind, ProbeVerdict
from schemas.probe import ProbeResult
from schemas.queries import TraceFilter
from schemas.records import RouterEvent
from tests.factories import (
    FALLBACK_REASON,
    KV_REASON,
    REJECTED_INSTANCE,
    SAMPLE_REQUEST_ID,
    SELECTED_INSTANCE,
    SELECTED_MODEL,
    TOP_RANKED,
)
from tests.factories import make_fallback_trace as sample_trace

__all__ = [
    "ALERT_RULE", "DRIFTING_INSTANCE", "FALLBACK_REASON", "HEALTHY_INSTANCE", "KV_REASON", "REJECTED_INSTANCE",
    "SAMPLE_REQUEST_ID", "SELECTED_INSTANCE", "SELECTED_MODEL", "SYNTAX_ONLY_INSTANCE", "TOP_RANKED", "StubTraceApi",
    "not_found", "sample_alerts", "sample_events", "sample_probe_results", "sample_router_state", "sample_trace",
]

HEALTHY_INSTANCE = "vllm-a-1"
DRIFTING_INSTANCE = "vllm-a-2"
SYNTAX_ONLY_INSTANCE = "vllm-b-1"
PROBE_MODEL = "qwen-7b"
ALERT_RULE = "SemanticDrift"
_ROUNDS = 20  # one every 30 s: the last 10 minutes


def sample_probe_results(now: datetime) -> list[ProbeResult]:
    """Probe rounds of the last 10 minutes: one healthy instance, one drifting and slowing, one syntax-only.

    The drifting instance's similarity falls below 0.65 (``failed``) and its p95 creeps past the
    +20% band (``degraded``) in the last rounds; its syntax probe keeps passing.
    """
    out: list[ProbeResult] = []

    def add(i: int, inst: str, kind: ProbeKind, verdict: ProbeVerdict, value: float, **extra: Any) -> None:
        ts = now - timedelta(seconds=30 * (_ROUNDS - i))
        out.append(ProbeResult(probe_id=f"p-{inst}-{kind.value}-{i}", ts=ts, instance=inst, model=PROBE_MODEL,
                               kind=kind, verdict=verdict, value=value, latency_ms=50.0, **extra))

    ok, degraded, failed = ProbeVerdict.OK, ProbeVerdict.DEGRADED, ProbeVerdict.FAILED
    for i in range(_ROUNDS):
        late = i >= _ROUNDS - 4
        for inst in (HEALTHY_INSTANCE, DRIFTING_INSTANCE, SYNTAX_ONLY_INSTANCE):
            add(i, inst, ProbeKind.SYNTAX, ok, 1.0, threshold=1.0)
        add(i, HEALTHY_INSTANCE, ProbeKind.SEMANTIC, ok, 0.86, threshold=0.65, reference="zh-summary")
        add(i, HEALTHY_INSTANCE, ProbeKind.LATENCY, ok, 800.0 + i, threshold=960.0, baseline=800.0)
        sim = 0.31 if late else 0.84
        add(i, DRIFTING_INSTANCE, ProbeKind.SEMANTIC, failed if late else ok, sim, threshold=0.65,
            reference="zh-summary", reason="similarity 0.31 < 0.65 to zh-summary" if late else "")
        p95 = 800.0 + 25.0 * i
        add(i, DRIFTING_INSTANCE, ProbeKind.LATENCY, degraded if p95 > 960 else ok, p95, threshold=960.0,
            baseline=800.0, reason=f"p95 {p95:.0f} ms > 960 ms" if p95 > 960 else "")
    return out


def sample_events(now: datetime) -> list[RouterEvent]:
    """Alert events of the last minutes (one fired and still firing, one fired and resolved), and a non-alert."""
    def ev(minutes: float, kind: str, message: str, instance: str | None, severity: str = "warning") -> RouterEvent:
        return RouterEvent(event_id=f"e-{kind}-{minutes}", ts=now - timedelta(minutes=minutes), kind=kind,
                           severity=severity, instance=instance, model=PROBE_MODEL, message=message)

    return [
        ev(9, "alert", "firing: LatencyCreep instance=vllm-a-1 p95 990 ms", HEALTHY_INSTANCE),
        ev(7, "alert", "resolved: LatencyCreep instance=vllm-a-1", HEALTHY_INSTANCE, "info"),
        ev(2, "alert", f"firing: {ALERT_RULE} instance={DRIFTING_INSTANCE} similarity 0.31", DRIFTING_INSTANCE,
           "error"),
        ev(5, "breaker", "breaker opened", DRIFTING_INSTANCE),
    ]


def sample_alerts(now: datetime) -> dict[str, Any]:
    """``GET /v1/alerts``: the drifting instance's semantic alert, firing."""
    alert = {"name": ALERT_RULE, "severity": "critical", "state": "firing", "instance": DRIFTING_INSTANCE,
             "model": PROBE_MODEL, "kind": "semantic", "since": (now - timedelta(minutes=2)).isoformat(),
             "value": 0.31, "summary": "semantic similarity below 0.65", "labels": {"team": "llm"},
             "description": f"{DRIFTING_INSTANCE} ({PROBE_MODEL}) semantic: value 0.31 similarity 0.31 < 0.65 to "
                            "zh-summary",
             "fingerprint": "f00d"}
    return {"alerts": [alert]}


def sample_router_state(now: datetime) -> dict[str, Any]:
    """``GET /v1/router/state`` as the gateway shapes it: snapshots under ``instances``, plus other keys."""
    since = (now - timedelta(minutes=1)).isoformat()
    drifting = {"instance": DRIFTING_INSTANCE, "model": PROBE_MODEL, "probes": [
        {"kind": "semantic", "verdict": "failed", "since": since, "value": 0.31, "threshold": 0.65, "flaps": 1},
        {"kind": "latency", "verdict": "degraded", "since": since, "value": 1275.0, "threshold": 960.0},
    ]}
    healthy = {"instance": HEALTHY_INSTANCE, "model": PROBE_MODEL, "probes": []}
    return {"instances": [healthy, drifting], "models": {}, "cluster": {}, "scrape": {"stalled": False},
            "quality": []}


def _in_window(ts: datetime, query: Mapping[str, list[str]]) -> bool:
    start, end = query.get("start"), query.get("end")
    return (not start or ts >= datetime.fromisoformat(start[0])) and (not end or ts < datetime.fromisoformat(end[0]))


def _matches(item: ProbeResult | RouterEvent, query: Mapping[str, list[str]]) -> bool:
    eq = all(str(getattr(item, f)) == query[f][0] for f in ("instance", "kind") if f in query)
    return eq and _in_window(item.ts, query)


# The store API's query routes, as an empty store answers them (the overview and fleet pages read them).
EMPTY_STORE_ANSWERS: dict[str, object] = {
    "/v1/analytics/buckets": {"buckets": []}, "/v1/analytics/traffic": {"edges": []},
    "/v1/analytics/misroutes": {"misroutes": []}, "/v1/snapshots": {"snapshots": []},
    "/v1/traces": {"items": [], "next_cursor": None},
    "/v1/analytics/constraints": {"constraints": []},
    "/v1/feedback": {"feedback": []},
}


def _json(data: object) -> tuple[int, bytes]:
    return 200, json.dumps(data).encode()



def _dump(items: Iterable[Any]) -> list[Any]:
    return [i.model_dump(mode="json") for i in items]


def from_store(store: Any, route: str, query: Mapping[str, list[str]]) -> tuple[int, bytes] | None:
    """Answer a store query route from a real ``TraceStore`` (``StubTraceApi(store=...)``); None: not such a route.

    Traffic, constraint stats, snapshots, events, a search and one trace, shaped as ``ingest.http_api.routes``
    shapes them.
    """
    one = {k: v[0] for k, v in query.items()}
    if route in ("/v1/analytics/traffic", "/v1/analytics/constraints"):
        flt = TraceFilter.model_validate({k: v for k, v in one.items() if k in TraceFilter.model_fields})
        if route.endswith("traffic"):
            return _json({"edges": _dump(store.traffic(flt))})
        return _json({"constraints": _dump(store.constraint_stats(flt))})
    if route in ("/v1/snapshots", "/v1/events"):
        span = datetime.fromisoformat(one["start"]), datetime.fromisoformat(one["end"])
        limit = int(one.get("limit", "100"))
        if route == "/v1/snapshots":
            return _json({"snapshots": _dump(store.snapshots(*span, instance=one.get("instance"), limit=limit))})
        return _json({"events": _dump(store.events(*span, kind=one.get("kind"), limit=limit))})
    if route == "/v1/traces":
        flt = TraceFilter.model_validate({k: v for k, v in one.items() if k in TraceFilter.model_fields})
        return _json(store.search(flt, limit=int(one.get("limit", "50"))).model_dump(mode="json"))
    if route == "/v1/feedback":
        return _json({"feedback": _dump(store.feedback(one.get("request_id", "")))})
    if route.startswith("/v1/traces/"):
        found = store.get(urllib.parse.unquote(route[len("/v1/traces/"):]))
        return (200, found.model_dump_json().encode()) if found else (404, not_found(route.rsplit("/", 1)[-1]))
    return None


def not_found(request_id: str) -> bytes:
    """The gateway's answer for an unknown id (``router_core.gateway.errors.error_response``)."""
    message = f"no trace for request_id '{request_id}'"
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": "trace_not_found"}
    return json.dumps({"error": error}).encode()


class StubTraceApi:
    """A loopback HTTP server answering ``GET /v1/traces/<id>``; use as a context manager.

    ``responses`` maps an id to a canned ``(status, body)``, for error cases. ``store`` (a real
    ``TraceStore``, e.g. a seeded DuckDB file) answers traffic, constraint stats, snapshots, events,
    feedback and trace lookups instead of the canned data (:func:`from_store`). ``feedback``: the
    verdicts ``GET /v1/feedback?request_id=`` answers (none by default).

    Attributes:
        url: Base URL, e.g. ``http://127.0.0.1:54321``.
        requests: Paths requested so far, in order.
    """

    def __init__(
        self,
        traces: Iterable[DecisionTrace],
        responses: Mapping[str, tuple[int, bytes]] | None = None,
        *,
        probes: Iterable[ProbeResult] = (),
        events: Iterable[RouterEvent] = (),
        alerts: Mapping[str, Any] | None = None,
        router_state: Mapping[str, Any] | None = None,
        store: Any = None,
        feedback: Iterable[Feedback] = (),
    ) -> None:
        canned = {t.request_id: (200, t.model_dump_json().encode()) for t in traces}
        canned.update(responses or {})
        results, evs, verdicts = list(probes), list(events), list(feedback)
        live = {"/v1/alerts": alerts, "/v1/router/state": router_state}
        self.requests: list[str] = []
        seen = self.requests

        def answer(path: str) -> tuple[int, bytes]:
            route, _, qs = path.partition("?")
            query = urllib.parse.parse_qs(qs)
            stored = None if store is None else from_store(store, route, query)
            if stored is not None:  # a real store behind the stub answers its query routes
                return stored
            if route == "/v1/probes":
                return _json({"results": [r.model_dump(mode="json") for r in results if _matches(r, query)]})
            if route == "/v1/events":
                return _json({"events": [e.model_dump(mode="json") for e in evs if _matches(e, query)]})
            if route == "/v1/feedback" and verdicts:  # the verdicts given, on the request asked for
                rid = query.get("request_id", [""])[0]
                return _json({"feedback": _dump(f for f in verdicts if f.request_id == rid)})
            if route in live:
                found = live[route]
                return _json(found) if found is not None else (404, b'{"error": {"code": "not_found"}}')
            if route in EMPTY_STORE_ANSWERS:  # the store's query routes, answered as by an empty store
                return _json(EMPTY_STORE_ANSWERS[route])
            prefix = "/v1/traces/"
            rid = urllib.parse.unquote(path[len(prefix) :]) if path.startswith(prefix) else None
            return canned.get(rid or "", (404, not_found(rid or "")))

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.path)
                status, body = answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="stub-trace-api", daemon=True
        )

    def __enter__(self) -> StubTraceApi:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
