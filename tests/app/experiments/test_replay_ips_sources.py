"""`routelens replay --policy`'s inverse-propensity estimate: the same from a file (`--db`) and a server (`--api`).

An audit found the misroute estimate over ``--api`` always empty ("not enough data: 0 logged requests
match the candidate") while ``--db`` gave one from 53 requests: the rows read through the query API
never carried their feedback. Here the same traces and feedback are replayed from the file and then
through a real store served on 127.0.0.1.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from app.cli import main
from bench.replay_traces import fleet_config
from ingest import DuckDBTraceStore
from schemas import Feedback
from tests.app.experiments.seed import STATE_ONLY, T0, decided, policy_yaml, store_traces
from tests.ingest.test_trace_store import served

SINCE, UNTIL = T0.isoformat(), (T0 + timedelta(days=1)).isoformat()


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here


def _ips(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert isinstance(data["ips"], dict)
    return data["ips"]


def test_the_estimate_reads_feedback_through_the_api_as_from_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = decided(400)
    path = store_traces(tmp_path / "traces.duckdb", traces)
    feedback = []
    later = T0 + timedelta(days=2)  # feedback counts on its request, whenever it came
    for i, t in enumerate(traces[::2]):  # half of them: wrong, right, or both said of the same request (wrong)
        if i % 4 in (0, 3):
            feedback.append(Feedback(request_id=t.request_id, ts=later, correct=False))
        if i % 4 in (0, 1, 2):
            feedback.append(Feedback(request_id=t.request_id, ts=later + timedelta(seconds=1), correct=True))
    store = DuckDBTraceStore(path)
    store.write_records(feedback)
    store.close()
    policy = policy_yaml(tmp_path / "no-qwen.yaml", fleet_config(scoring=STATE_ONLY, drop_model="qwen-72b"))
    argv = ["replay", "--since", SINCE, "--until", UNTIL, "--policy", str(policy), "--filter", "arm=a", "--json"]

    from_file = _ips([*argv, "--db", str(path)], capsys)
    store = DuckDBTraceStore(path)
    try:
        with served(store, tmp_path / "spool") as url:
            through_api = _ips([*argv, "--api", url], capsys)
    finally:
        store.close()

    in_arm = {t.request_id: t for t in traces if t.experiment_arm == "a"}
    said = {f.request_id for f in feedback if f.request_id in in_arm}
    misroute = from_file["misroute_rate"]
    assert misroute["n"] == len(said) > 20 and 0 < misroute["matched"] < len(said)  # type: ignore[operator]
    assert misroute["value"] is not None and 0 < misroute["value"] < 1  # type: ignore[operator]
    assert set(through_api) == set(from_file) == {"cost_per_request", "misroute_rate"}
    for name, est in from_file.items():  # the same requests, summed in another order (newest first through the API)
        got = through_api[name]
        assert set(got) == set(est) and got["note"] == est["note"], name
        for key in ("value", "n", "matched", "effective_n", "logged_mean"):
            assert got[key] == pytest.approx(est[key], rel=1e-9), (name, key)
        assert got["ci"] == pytest.approx(est["ci"], rel=1e-9), name
