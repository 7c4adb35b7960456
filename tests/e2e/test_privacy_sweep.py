"""The whole system, run as an operator runs it, leaves the raw query text nowhere but in the request and the answer.

A simulated fleet and ``routelens serve --workers 2`` (a store process with its DuckDB file, a
local Redis the workers share, the prober, OpenTelemetry export to a receiver this test runs on
loopback), configured from the shipped ``routelens.yaml`` moved into this test's own folder: the
seed 000 routing matrix, semantic intents from the shipped routes file, keyword routing, both A/B
arms and a shadow deciding every request, client throttles, shedding, the prefilter, session
affinity and the answer cache, plus an external instance that quotes requests back in its errors.
Every process logs at DEBUG, every library's loggers too (``debug_logging/sitecustomize.py``: ``--log-level
debug`` turns up RouteLens's own loggers only).
Requests carry an English and a Chinese canary through every path a query takes
(:mod:`tests.e2e.privacy_paths`), then feedback and a trace posted to the intake with the canary in
a field the contract does not have and in one of the wrong type, and a line that is not JSON.
Once every trace is stored and exported, the canaries (:mod:`tests.e2e.privacy_canaries`: each
word, lower-cased, NFKC-folded, JSON-escaped, URL-encoded) are looked for in each file under the
test's folder (spool segments, quarantine, the DuckDB file and its WAL; while serving and after),
files the run left in the temporary folder, every string of every DuckDB table, every key and value
of the local Redis, every line each process wrote, every OTLP body received, ``/metrics`` of both
workers and of the store, and the read APIs' answers (and the dry runs', which are traces). The
answers the client gets to its own requests are not looked at: they hold what the instance echoed.

Not exercised here: the Elasticsearch sink (no server can be installed here;
``tests/ingest/elasticsearch`` covers what it writes) and the Streamlit app, which only reads the
read APIs swept here. Takes about 35 s on two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.run.procs import free_ports
from bench.drain import left_in_pipeline, store_url_of
from bench.gateway_otel import OtlpReceiver
from tests.e2e.conftest import ROOT, Proc
from tests.e2e.privacy_canaries import (
    CANARY_EN,
    CANARY_EN_WIDE,
    CANARY_NAME,
    CANARY_ZH,
    Canary,
    duckdb_blobs,
    file_blobs,
    findings,
    redis_blobs,
    report,
    temp_blobs,
)
from tests.e2e.privacy_paths import Q, echo_instance, post, raw_calls, sdk_calls
from tests.polling import wait_until
from tests.redis_server import REDIS_SERVER
from tests.serve_thread import in_thread

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not found")]
PY = [sys.executable, "-m", "app"]
ROUTES = ROOT / "data" / "intents" / "routelens_routes.yaml"
EXPECTED = {"forced arm": 200, "bad field": 400, "not json": 400, "unknown arm": 400, "too long": 400,
            "bad attachment": 400, "prefilter": 400, "repetition": 400, "unknown model": 404,
            "not a chat route": 404, "dry run": 200, "attachment file name": 200, "attachment url path": 200,
            "attachment media type": 200, "attachment audio format": 200, "dry run, a policy sent": 200,
            "echo-400": 400, "echo-500": 502, "echo-stream": 200, "throttled": 429, "cut short": 408,
            "header not utf-8": 400, "control character": 400, "oversized": 413, "failed upstream": 502}


def config(tmp: Path, otlp: str, echo: str) -> tuple[Path, dict[str, Any]]:
    """The shipped configuration, with this test's ports, folders and receiver, and every feature on."""
    cfg: dict[str, Any] = yaml.safe_load((ROOT / "routelens.yaml").read_text())
    *inst, gw = free_ports(len(cfg["fleet"]["instances"]) + 1)
    for spec, port in zip(cfg["fleet"]["instances"], inst, strict=True):
        spec["url"] = f"http://127.0.0.1:{port}"
    cfg["fleet"]["instances"].append({"id": "echo-a", "model": "echo", "url": echo, "engine": "external",
                                      "kv_cache_bytes": "16GB", "probes": False})  # ``sim fleet`` leaves it out
    routes = tmp / "intents" / ROUTES.name  # the intents cache is written beside the routes file: a copy
    routes.parent.mkdir()
    for f in (ROUTES, ROUTES.with_name(ROUTES.name + ".intents-cache.npz")):
        if f.exists():
            shutil.copy(f, routes.parent / f.name)
    cfg["gateway"].update({"port": gw, "body_timeout_s": 2})
    cfg["storage"] = {"duckdb_path": str(tmp / "data" / "traces.duckdb"), "flush_interval_ms": 20,
                      "store_flush_interval_ms": 50, "spool": {"segment_bytes": 1 << 20}}
    cfg["routing"].update({
        "policy": str(ROOT / cfg["routing"]["policy"]), "intents": {"routes": str(routes)},
        "keywords": {"target": "deepseek-v4-32k", "threshold": 5,
                     "patterns": [{"pattern": "refund|退款", "weight": 6}]}})
    cfg["experiments"]["shadow"]["sample"] = 1.0
    cfg["scrape"] = {"interval_s": 0.5, "timeout_s": 0.5, "stale_after_s": 30}
    cfg["probes"] = {"interval_s": 2, "kinds": ["syntax", "latency"]}
    cfg["otel"] = {"enabled": True, "endpoint": otlp, "sample_ratio": 1.0}
    cfg["throttles"] = {
        "client": {"rate": 0.01, "burst": 1, "key": ["header:x-tenant"]},
        "shedding": {"rate": 1000, "burst": 2000},
        "prefilter": {"patterns": [{"name": "injection", "regex": "(?i)ignore (all )?previous instructions"}]}}
    cfg["router"]["on_empty"] = "reject"  # the degraded steps (the answer cache among them) run only so
    cfg["economics"] = {"affinity": {"header": "x-ticket-id"},
                        "degraded": {"steps": ["cache", "reject"], "cache": {"enabled": True}}}
    path = tmp / "routelens.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return path, cfg


def get(url: str, timeout: float = 30) -> tuple[int, bytes, str | None]:
    """A GET on a new connection: status, body, the worker that answered."""
    req = urllib.request.Request(url, headers={"Connection": "close"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(), resp.headers.get("x-routelens-worker")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("x-routelens-worker")


def per_worker_metrics(gateway: str) -> dict[str, bytes]:
    """One ``/metrics`` of each of the two workers, once each has nothing left in its pipeline (OTLP included)."""
    seen: dict[str, bytes] = {}
    deadline = time.monotonic() + 60
    while len(seen) < 2 and time.monotonic() < deadline:
        _, text, worker = get(f"{gateway}/metrics")
        if worker is not None and left_in_pipeline(text.decode()) == 0:
            seen[worker] = text
        else:
            seen.pop(str(worker), None)
            time.sleep(0.1)
    assert set(seen) == {"0", "1"}, f"a worker's pipeline never drained: {sorted(seen)}"
    return seen


def send_everything(gateway: str, instances: dict[str, str]) -> tuple[list[str], list[bytes]]:
    """Every path, feedback and the intake: the request ids traced, the dry runs' answers."""
    ids = sdk_calls(gateway)
    paths, dry = raw_calls(gateway, instances)
    assert {k: s for k, (s, _) in paths.items()} == EXPECTED
    ids += [rid for _, rid in paths.values() if rid]
    feedback = f"{gateway}/v1/feedback"
    verdict = {"request_id": ids[0], "correct": False, "expected_model": "deepseek-coder-6b-fp16"}
    assert post(feedback, verdict)[0] == 202
    assert post(feedback, {"request_id": ids[1], "correct": False, "expected_class": f"{Q} class"})[0] == 400
    assert post(feedback, {"request_id": ids[1], "correct": False, "source": f"{Q} {'x' * 70_000}"})[0] == 413
    status, trace, _ = get(f"{gateway}/v1/traces/{ids[0]}")
    assert status == 200
    posted = {**json.loads(trace), "request_id": "intake-canary", "zz_note": f"{Q} unknown field",
              "latency_ms": f"{Q} a text where a number goes"}
    lines = [json.dumps(posted, ensure_ascii=False), f'{{"request_id": "intake-broken", "x": "{Q} unparseable']
    assert post(f"{gateway}/v1/traces", "\n".join(lines).encode())[0] == 422  # both lines refused
    return ids, dry


def read_apis(gateway: str, store: str, ids: list[str]) -> dict[str, bytes]:
    """``/metrics`` of both workers and of the store once drained, and the read APIs' answers."""
    answers = {f"gateway /metrics (worker {w})": m for w, m in per_worker_metrics(gateway).items()}
    assert wait_until(lambda: left_in_pipeline(get(f"{store}/metrics")[1].decode()) == 0, 30)
    answers["store /metrics"] = get(f"{store}/metrics")[1]
    now = datetime.now(UTC)
    window = (f"start={(now - timedelta(hours=1)).isoformat().replace('+00:00', 'Z')}"
              f"&end={(now + timedelta(minutes=1)).isoformat().replace('+00:00', 'Z')}")
    for route in [*(f"/v1/traces/{rid}" for rid in ids), "/v1/traces?limit=1000", "/v1/router/state",
                  f"/v1/feedback?request_id={ids[0]}", "/v1/alerts", "/v1/probes/verdicts",
                  f"/v1/quarantine?{window}", f"/v1/events?{window}", f"/v1/analytics/misroutes?{window}",
                  "/v1/analytics/traffic", f"/v1/analytics/constraints?{window}"]:
        status, got, _ = get(f"{gateway}{route}")
        assert status == 200, (route, got[:300])
        answers[f"GET {route}"] = got
    quarantined = json.loads(answers[f"GET /v1/quarantine?{window}"])["records"]
    assert {r["request_id"] for r in quarantined} >= {"intake-canary"}, quarantined
    return answers


def offline_import(config: Path, source: Path) -> str:
    """``routelens ingest import --mapping generic``: another router's log lines, prompts and messages in them
    (hashed, then dropped), one refused (quarantined, redacted) and one not JSON; the command's output."""
    now = datetime.now(UTC).isoformat()
    lines = [json.dumps(r, ensure_ascii=False) for r in (
        {"id": "gen-prompt", "ts": now, "prompt": f"{Q} generic prompt", "model": "m", "duration_ms": 12},
        {"id": "gen-messages", "ts": now, "duration_ms": 5, "messages": [
            {"role": "system", "content": f"{Q} generic system"}, {"role": "user", "content": f"{Q} generic user"}]},
        {"id": "gen-refused", "ts": now, "prompt": f"{Q} generic refused"})]  # no duration: refused
    source.write_text("\n".join([*lines, f'{{"id": "gen-broken", "prompt": "{Q} not json']) + "\n")
    run = subprocess.run([*PY, "--config", str(config), "ingest", "import", "--mapping", "generic", str(source)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "accepted 2  rejected 2" in run.stdout, run.stdout + run.stderr
    return run.stdout + run.stderr


@dataclass
class Swept:
    """What one run left behind (``{place: bytes}``), and what it served."""

    blobs: dict[str, bytes]
    ids: list[str]
    otlp: list[bytes]
    output: str


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Swept:
    """Run everything once; gather every file, table, key, line, body and answer it left."""
    tmp = tmp_path_factory.mktemp("privacy")
    started, t0 = time.time(), time.monotonic()
    receiver = OtlpReceiver(keep=True)
    blobs: dict[str, bytes] = {}
    with in_thread(echo_instance()) as echo:
        path, cfg = config(tmp, receiver.url, echo)
        gateway = f"http://127.0.0.1:{cfg['gateway']['port']}"
        fleet = Proc([*PY, "--config", str(path), "sim", "fleet", "--zero-delay"])
        procs = [fleet]
        try:
            fleet.wait_for("fleet ready")
            with pytest.MonkeyPatch.context() as mp:  # serve and every process it starts log at DEBUG
                mp.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent / "debug_logging"),
                                                         *filter(None, [os.environ.get("PYTHONPATH")])]))
                serve = Proc([*PY, "--config", str(path), "serve", "--workers", "2"])
            procs.append(serve)
            serve.wait_for("gateway ready http")
            store = store_url_of("".join(serve.lines))
            assert store is not None, "".join(serve.lines)
            assert wait_until(lambda: json.loads(get(f"{gateway}/health")[1]).get("intents") == "ready", 60)
            ids, dry = send_everything(gateway, {i["id"]: i["url"] for i in cfg["fleet"]["instances"]})
            blobs |= read_apis(gateway, store, ids)
            blobs |= {f"POST /v1/router/decide #{i} (a dry run's trace)": a for i, a in enumerate(dry)}
            blobs |= redis_blobs(tmp / "data" / "redis.sock")
            blobs |= file_blobs(tmp, "while serving")
        finally:
            for p in reversed(procs):
                p.stop()
            receiver.close()
    output = "".join(serve.lines) + offline_import(path, tmp.parent / f"{tmp.name}-other-router.jsonl")
    blobs |= file_blobs(tmp, "after serve stopped and the import")
    blobs |= temp_blobs(started, skip=tmp)
    blobs |= duckdb_blobs(tmp / "data" / "traces.duckdb", tmp.parent / f"{tmp.name}-copy")
    blobs["the output of serve (gateways, store, prober, redis) and of the import"] = output.encode()
    blobs["the simulated fleet's output"] = "".join(fleet.lines).encode()
    otlp = [body for _, _, body in receiver.received]
    blobs |= {f"OTLP export #{i}": body for i, body in enumerate(otlp)}
    print(f"privacy sweep: {len(ids)} traced requests, {len(otlp)} OTLP bodies, {time.monotonic() - t0:.1f} s",
          file=sys.stderr)
    return Swept(blobs, ids, otlp, output)


def test_the_sweep_saw_what_it_sweeps(swept: Swept) -> None:
    assert any(swept.ids[0].encode() in body for body in swept.otlp), "the requests' spans never reached the receiver"
    assert any(" DEBUG " in line for line in swept.output.splitlines()), "the processes did not log at DEBUG"
    tables = [place for place in swept.blobs if place.startswith("duckdb table main.traces")]
    assert tables and swept.ids[-1].encode() in swept.blobs[tables[0]], "the traces are not in the DuckDB file"
    assert any("spool" in place and place.startswith("after") for place in swept.blobs)
    assert b"gen-prompt" in swept.blobs[tables[0]], "the offline import stored nothing"
    quarantine = next(data for place, data in swept.blobs.items() if place.startswith("duckdb table main.quarantine"))
    assert b"intake-canary" in quarantine and b"gen-refused" in quarantine, "the refused records were not quarantined"


def test_no_query_text_outside_requests_and_answers(swept: Swept) -> None:
    found = findings(Canary([*CANARY_EN.split(), *CANARY_EN_WIDE.split(), CANARY_ZH, CANARY_ZH[2:]]), swept.blobs)
    assert not found, report(found, "the raw query text")


def test_no_attachment_name_outside_requests_and_answers(swept: Swept) -> None:
    found = findings(Canary(CANARY_NAME.split()), swept.blobs)
    assert not found, report(found, "what a client wrote as an attachment's name or type")
