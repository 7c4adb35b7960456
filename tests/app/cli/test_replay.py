"""``routelens replay --since --until --policy FILE [--filter k=v] [--api URL | --db FILE] [--json]``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from bench.replay_traces import fleet_config
from ingest import DuckDBTraceStore
from tests.app.experiments.seed import STATE_ONLY, T0, decided, policy_yaml, store_traces
from tests.ingest.test_trace_store import served

SINCE, UNTIL = T0.isoformat(), "2026-11-02T00:00:00Z"


@pytest.fixture(scope="module")
def traces() -> list:  # type: ignore[type-arg]
    return decided(200)


@pytest.fixture(scope="module")
def db(traces: list, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[type-arg]
    return store_traces(tmp_path_factory.mktemp("db") / "traces.duckdb", traces, detail_share=0.8)


@pytest.fixture
def same(tmp_path: Path) -> Path:
    return policy_yaml(tmp_path / "same.yaml", fleet_config(scoring=STATE_ONLY))


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def _err(captured: pytest.CaptureFixture[str]) -> str:
    return " ".join(captured.readouterr().err.split())


def _last_json(out: str) -> dict[str, object]:
    data = json.loads(out.strip().splitlines()[-1])
    assert isinstance(data, dict)
    return data


def test_json_from_a_file_has_the_contract_shape(db: Path, same: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", "--since", SINCE, "--until", UNTIL, "--policy", str(same), "--db", str(db), "--json"])
    assert code == 0
    data = _last_json(capsys.readouterr().out)
    assert {"n", "replayed", "flip_rate", "flip_ci", "matrix"} <= set(data)
    assert data["n"] == 200 and data["flip_rate"] == 0.0
    assert isinstance(data["flip_ci"], list) and len(data["flip_ci"]) == 2
    assert data["not_replayable"] == 200 - data["replayed"] > 0  # type: ignore[operator]
    matrix = data["matrix"]
    assert isinstance(matrix, dict) and all(set(row) == {src} for src, row in matrix.items())


def test_a_banned_model_flips_and_the_summary_says_why(db: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    ban = policy_yaml(tmp_path / "ban.yaml", fleet_config(scoring=STATE_ONLY, drop_model="qwen-72b"))
    code = main(["replay", "--since", SINCE, "--until", UNTIL, "--policy", str(ban), "--db", str(db), "--json"])
    captured = capsys.readouterr()
    assert code == 0
    data = _last_json(captured.out)
    assert data["flips"] == data["model_flips"] == sum(data["matrix"]["qwen-72b"].values())  # type: ignore[index]
    err = " ".join(captured.err.split())
    assert "not in the new fleet" in err and "not replayable" in err and "sampled out" in err


def test_a_policy_file_goes_into_the_config_and_the_filter_narrows(db: Path, same: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("scoring:\n  preset: balanced\n", encoding="utf-8")
    code = main(["replay", "--config", str(same), "--since", SINCE, "--until", UNTIL, "--policy", str(policy),
                 "--db", str(db), "--filter", "arm=a", "--filter", "model=deepseek-v4-32k", "--json", "--quiet"])
    captured = capsys.readouterr()
    assert code == 0 and captured.err == ""
    data = _last_json(captured.out)
    assert data["filter"] == {"experiment_arm": "a", "model": "deepseek-v4-32k"}
    assert list(data["matrix"]) in ([], ["deepseek-v4-32k"])  # type: ignore[arg-type]


def test_a_routing_policy_takes_the_place_of_the_configs(db: Path, same: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A routing matrix (as ``policies/seed000.yaml``) is the config's ``routing.policy``, checked as it loads."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("routing_matrix:\n  - rule_name: long\n    condition: 'input_length > 8000'\n"
                     "    primary_target: qwen-72b\n", encoding="utf-8")
    code = main(["replay", "--config", str(same), "--since", SINCE, "--until", UNTIL, "--policy", str(rules),
                 "--db", str(db), "--json", "--quiet"])
    captured = capsys.readouterr()
    assert code == 0 and captured.err == ""
    data = _last_json(captured.out)
    assert data["policy"] == str(rules) and data["n"] == data["replayed"] + data["not_replayable"] == 200
    assert data["flips"] == 0  # the stored decisions named no rule: the new rule set leaves them as they were
    rules.write_text("routing_matrix:\n  - rule_name: long\n    primary_target: no-such-model\n", encoding="utf-8")
    code = main(["replay", "--config", str(same), "--since", SINCE, "--until", UNTIL, "--policy", str(rules),
                 "--db", str(db)])
    assert code == 2 and f"{rules}:3:" in _err(capsys)


def test_through_the_api(traces: list, same: Path, tmp_path: Path,  # type: ignore[type-arg]
                         capsys: pytest.CaptureFixture[str]) -> None:
    store = DuckDBTraceStore(tmp_path / "served.duckdb")
    store.write_records(traces[:60])
    try:
        with served(store, tmp_path / "spool") as url:
            code = main(["replay", "--since", SINCE, "--until", UNTIL, "--policy", str(same), "--api", url, "--json"])
    finally:
        store.close()
    assert code == 0
    data = _last_json(capsys.readouterr().out)
    assert (data["n"], data["replayed"], data["flips"]) == (60, 60, 0)


@pytest.mark.parametrize(("args", "says"), [
    (["--since", "yesterday"], "is not an ISO 8601 time"),
    (["--until", "2026-10-01T00:00:00Z"], "must be after --since"),
    (["--since", "2025-01-01T00:00:00Z", "--until", "2025-01-02T00:00:00Z"], "no stored traces between"),
    (["--filter", "colour=red"], "unknown filter key 'colour'"),
    (["--filter", "model"], "must be key=value"),
    (["--filter", "outcome=maybe"], "--filter outcome"),
    (["--policy", "missing.yaml"], "no such policy file"),
    (["--policy", "BAD"], "scoring.preset"),
    (["--policy", "NOFLEET"], "needs the base configuration"),
    (["--db", "nowhere.duckdb"], "does not exist"),
])
def test_bad_input_exits_2_with_a_message(args: list[str], says: str, db: Path, same: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: no base configuration (a --config named must exist)
    (tmp_path / "bad.yaml").write_text("fleet:\n  instances: []\nscoring:\n  preset: nope\n", encoding="utf-8")
    (tmp_path / "nofleet.yaml").write_text("scoring:\n  preset: balanced\n", encoding="utf-8")
    base = {"--since": SINCE, "--until": UNTIL, "--policy": str(same), "--db": str(db)}
    extra: list[str] = []
    for flag, value in zip(args[::2], args[1::2], strict=False):
        value = {"BAD": str(tmp_path / "bad.yaml"), "NOFLEET": str(tmp_path / "nofleet.yaml")}.get(value, value)
        if flag in base:
            base[flag] = value
        else:
            extra += [flag, value]
    if args == ["--filter", "model"]:
        extra = ["--filter", "model"]
    argv = ["replay", *[x for kv in base.items() for x in kv], *extra]
    assert main(argv) == 2
    err = _err(capsys)
    assert says in err and "Traceback" not in err


def test_an_unreachable_server_exits_2(same: Path, closed_port_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", "--since", SINCE, "--until", UNTIL, "--policy", str(same), "--api", closed_port_url])
    assert code == 2
    assert "unreachable" in _err(capsys)

