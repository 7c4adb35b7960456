"""``routelens compare A B --since --until [--by] [--api URL | --db FILE] [--json]``: a report, or exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main
from ingest import DuckDBTraceStore
from schemas.experiments import METRICS
from tests.ingest.experiments.experiment_data import END, POLICY, T0, experiment, forced
from tests.ingest.test_trace_store import served

SINCE, UNTIL = T0.isoformat(), END.isoformat()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "exp.duckdb"
    store = DuckDBTraceStore(path)
    traces, feedback = experiment(500, 500)
    store.write_records(traces)
    store.write_records(feedback)
    store.close()
    return path


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: nothing but the options chooses the source


def _err(captured: pytest.CaptureFixture[str]) -> str:
    return " ".join(captured.readouterr().err.split())  # the console wraps long lines


def _last_json(out: str) -> dict[str, object]:
    data = json.loads(out.strip().splitlines()[-1])
    assert isinstance(data, dict)
    return data


def _check_shape(data: dict[str, object]) -> None:
    assert {"a", "b", "n_a", "n_b", "srm_p", "metrics"} <= set(data)
    metrics = data["metrics"]
    assert isinstance(metrics, dict) and list(metrics) == list(METRICS)
    for m in metrics.values():
        assert {"a", "b", "delta", "ci"} <= set(m) and len(m["ci"]) == 2


def test_json_from_a_file_has_the_contract_shape(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "a", "b", "--since", SINCE, "--until", UNTIL, "--db", str(db), "--json"]) == 0
    data = _last_json(capsys.readouterr().out)
    _check_shape(data)
    assert (data["a"], data["b"], data["n_a"], data["n_b"], data["by"]) == ("a", "b", 500, 500, "arm")
    cost = data["metrics"]["cost_per_request"]  # type: ignore[index]
    assert cost["ci"][1] < 0 and cost["significant_after_correction"]
    errors = data["metrics"]["error_rate"]  # type: ignore[index]
    assert errors["ci"][0] < 0 < errors["ci"][1]


def test_versions_and_policy_prefixes_are_detected(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "v2.3", "v2.4", "--since", SINCE, "--until", UNTIL, "--db", str(db), "--json"]) == 0
    assert _last_json(capsys.readouterr().out)["by"] == "version"
    short_a, short_b = POLICY["a"].split(":")[1][:8], POLICY["b"].split(":")[1][:8]
    assert main(["compare", short_a, short_b, "--since", SINCE, "--until", UNTIL, "--db", str(db), "--json"]) == 0
    data = _last_json(capsys.readouterr().out)
    assert (data["by"], data["a"], data["b"]) == ("policy", POLICY["a"], POLICY["b"])


def test_the_table(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "a", "b", "--since", SINCE, "--until", UNTIL, "--db", str(db), "--by", "arm"]) == 0
    out = capsys.readouterr().out
    assert "cost_per_request" in out and "latency_p95_ms" in out and "sample-ratio p" in out
    assert "cost_per_request" in out.splitlines()[-1]  # the verdict names what moved


def test_not_enough_data_is_a_report_that_says_so(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["compare", "a", "b", "--since", SINCE, "--until", UNTIL, "--db", str(db), "--json", "--min-samples", "501"]
    assert main(args) == 0
    data = _last_json(capsys.readouterr().out)
    assert data["enough_data"] is False and str(data["verdict"]).startswith("not enough data")


BAD = [
    (["a", "zz"], "unknown 'zz'"),
    (["a", "b", "--by", "version"], "by version: unknown 'a', 'b'"),
    (["a", "a"], "A and B must differ"),
    (["a", "b", "--since", "last tuesday", "--until", UNTIL], "is not an ISO 8601 time"),
    (["a", "b", "--since", UNTIL, "--until", SINCE], "must be after --since"),
    (["a", "b", "--since", "2020-01-01", "--until", "2020-01-02"], "no traces between"),
    (["a", "b", "--shares", "half"], "--shares 'half' must be two numbers"),
    (["a", "b", "--min-samples", "0"], "--min-samples: Input should be greater than or equal to 1"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[b[1] for b in BAD])
def test_bad_input_exits_2_with_a_message(db: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                                          message: str) -> None:
    window = [] if "--since" in extra else ["--since", SINCE, "--until", UNTIL]
    assert main(["compare", *extra, *window, "--db", str(db), "--json"]) == 2
    captured = capsys.readouterr()
    text = " ".join(captured.err.split())
    assert message in text and "Traceback" not in text and captured.out == ""


def test_no_source_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "a", "b", "--since", SINCE, "--until", UNTIL, "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "does not exist" in _err(capsys)
    assert main(["compare", "a", "b", "--since", SINCE, "--until", UNTIL, "--api", "http://127.0.0.1:9"]) == 2
    assert "unreachable" in _err(capsys)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[str]:
    store = DuckDBTraceStore(tmp_path / "served.duckdb")
    traces, feedback = experiment(300, 300)
    store.write_records(traces)
    store.write_records(feedback)
    with served(store, tmp_path / "spool") as url:
        yield url
    store.close()


def test_through_the_api(api: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "v2.3", "v2.4", "--since", SINCE, "--until", UNTIL, "--api", api, "--json"]) == 0
    data = _last_json(capsys.readouterr().out)
    _check_shape(data)
    assert (data["n_a"], data["n_b"], data["by"]) == (300, 300, "version")
    assert main(["compare", "a", "nope", "--since", SINCE, "--until", UNTIL, "--api", api]) == 2
    assert "unknown 'nope'" in _err(capsys)


def test_designed_shares_from_the_config(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["compare", "a", "b", "--since", SINCE, "--until", UNTIL, "--db", str(db), "--json"]
    assert main([*args, "--shares", "0.8,0.2"]) == 0
    data = _last_json(capsys.readouterr().out)
    assert data["shares"] == [0.8, 0.2] and data["srm_flag"] is True


def test_the_table_says_how_many_forced_requests_were_left_out(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "forced.duckdb"
    store = DuckDBTraceStore(path)
    traces, feedback = experiment(200, 200)
    dyed, _ = forced({"a": 2, "b": 5})
    store.write_records([*traces, *dyed])
    store.close()
    assert main(["compare", "a", "b", "--since", SINCE, "--until", UNTIL, "--db", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "requests: A 200, B 200" in out and "forced by header, left out: A 2, B 5" in out
    assert "(7 requests forced onto an arm by header left out)" in out
