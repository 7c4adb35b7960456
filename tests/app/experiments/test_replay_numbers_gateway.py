"""``routelens replay --policy``'s figures over a gateway's traffic, against a count made apart from it.

The audit of session 19 drove a real fleet and gateway with a known mix and checked every figure
of the report against the trace file: this keeps that check. A gateway (two rules, softmax,
sessions; :func:`tests.app.experiments.test_replay_gateway.traffic`) decides 120 requests, stored
with a fifth of them sampled out; they are replayed under the same configuration without one
instance and with prices, from the file and through the query API. The truth is counted from the
file's rows and the reference engine (:func:`router_core.decide.replay.replay`, one trace at a
time), not from the replay's own reader, memo or tally.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from app.cli import main
from app.config import load_config
from ingest import DuckDBTraceStore
from ingest.codec.encoder import Encoder
from ingest.record_sink import batch_of
from router_core.decide.replay import NotReplayable, replay
from tests.app.experiments.test_replay_gateway import traffic
from tests.ingest.test_trace_store import served

PRICES = {"big": 2.0, "small": 0.5}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, datetime, datetime]:
    tmp = tmp_path_factory.mktemp("gw")
    hooks, config_path = asyncio.run(traffic(tmp, 120))
    traces = list(hooks.traces.values())
    db = tmp / "t.duckdb"
    store = DuckDBTraceStore(db)
    store.write_records(list(hooks.policies.values()))
    enc = Encoder(detail_share=0.8)
    store.write(store.prepare(batch_of([item for t in traces for item in enc.encode(t)])))
    store.close()
    cfg = yaml.safe_load(config_path.read_text())
    cfg["fleet"]["instances"] = [{**i, "cost": {"base": PRICES[i["model"]]}} for i in cfg["fleet"]["instances"]
                                 if i["id"] != "small-b"]
    policy = tmp / "without-small-b.yaml"  # a whole configuration: its fleet is the replay's
    policy.write_text(yaml.safe_dump(cfg))
    return db, policy, min(t.ts for t in traces), max(t.ts for t in traces) + timedelta(seconds=1)


def truth(db: Path, policy: Path) -> dict[str, Any]:
    """The report's figures counted from the file's rows and the reference engine, one trace at a time."""
    config = load_config(policy)
    prices = {s.id: s.cost.base for s in config.fleet.instances}
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT request_id, detail, len(candidates), outcome.cost FROM traces").fetchall()
    con.close()
    store = DuckDBTraceStore(db, read_only=True)
    out: dict[str, Any] = {"n": len(rows), "replayed": 0, "flips": 0, "model_flips": 0}
    matrix: dict[str, Counter[str]] = defaultdict(Counter)
    instances: dict[str, Counter[str]] = defaultdict(Counter)
    skipped: Counter[str] = Counter()
    cost = {"requests": 0, "flipped": 0, "delta_total": 0.0}
    try:
        for rid, detail, n_cands, stored_cost in rows:
            if not detail or not n_cands:
                skipped["sampled out" if not detail else "no candidates"] += 1
                continue
            trace = store.get(rid)
            assert trace is not None
            try:
                new = replay(trace, config)
            except NotReplayable as exc:
                skipped[str(exc)] += 1
                continue
            first = next(c for c in trace.candidates if c.rank == 1)  # the live decision's first choice
            out["replayed"] += 1
            matrix[first.model][new.selected_model or "(none)"] += 1
            instances[first.instance][new.selected_instance or "(none)"] += 1
            cost["requests"] += 1
            if new.selected_instance != first.instance:
                out["flips"] += 1
                out["model_flips"] += new.selected_model != first.model
                old_price = prices.get(first.instance, stored_cost)
                assert new.selected_instance is not None and old_price is not None
                cost["flipped"] += 1
                cost["delta_total"] += prices[new.selected_instance] - old_price
    finally:
        store.close()
    out["not_replayable"] = out["n"] - out["replayed"]
    out["matrix"] = {k: dict(v) for k, v in matrix.items()}
    out["instance_matrix"] = {k: dict(v) for k, v in instances.items()}
    out["cost"] = cost
    out["skipped"] = sum(skipped.values())
    return out


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    got = {k: report[k] for k in ("n", "replayed", "not_replayable", "flips", "model_flips", "matrix",
                                  "instance_matrix")}
    got["cost"] = {k: report["cost"][k] for k in ("requests", "flipped")}
    got["cost"]["delta_total"] = round(report["cost"]["delta_total"], 9)
    return got


def test_the_report_from_the_file_and_from_the_api_is_the_count_of_the_file(
        stored: tuple[Any, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    db, policy, since, until = stored
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    want = truth(db, policy)
    assert want["flips"] > 0 and want["model_flips"] >= 0 and want["skipped"] == want["not_replayable"] > 0
    expected = {k: want[k] for k in ("n", "replayed", "not_replayable", "flips", "model_flips", "matrix",
                                     "instance_matrix")}
    expected["cost"] = {**want["cost"], "delta_total": round(want["cost"]["delta_total"], 9)}
    args = ["replay", "--since", since.isoformat(), "--until", until.isoformat(), "--policy", str(policy), "--json",
            "--quiet"]
    assert main([*args, "--db", str(db)]) == 0
    from_file = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert _figures(from_file) == expected
    assert sum(c["flips"] for c in from_file["causes"]) == from_file["flips"]  # every flip has one cause
    assert from_file["flip_rate"] == pytest.approx(want["flips"] / want["replayed"])
    assert from_file["cost"]["delta_mean"] == pytest.approx(want["cost"]["delta_total"] / want["cost"]["requests"])
    copy = tmp_path / "served.duckdb"
    copy.write_bytes(db.read_bytes())
    store = DuckDBTraceStore(copy)
    try:
        with served(store, tmp_path / "spool") as url:
            assert main([*args, "--api", url]) == 0
    finally:
        store.close()
    assert _figures(json.loads(capsys.readouterr().out.splitlines()[-1])) == expected
