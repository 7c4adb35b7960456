"""``routelens compare``'s sample-ratio check against the arms' designed shares, by arm and by version; unknown ones.

An audit ran a 70/30 experiment: ``compare`` by version fell back to 50/50 and printed "SAMPLE RATIO
MISMATCH", though the configuration said which arms run which version. Shares that are not known are
now said to be assumed (50/50), not flagged as a mismatch of a design nobody gave.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import compare as cli_compare
from app.cli import main
from ingest import DuckDBTraceStore
from ingest.experiments import compare as ingest_compare
from schemas.config.experiments import ExperimentsSettings
from tests.ingest.experiments.experiment_data import END, POLICY, T0, experiment
from tests.ingest.test_trace_store import served

SINCE, UNTIL = T0.isoformat(), END.isoformat()
CONFIG = """
fleet:
  instances:
    - {id: i1, model: m, url: "http://127.0.0.1:1"}
experiments:
  key: session
  arms:
    - {name: a, router_version: v2.3, share: 0.7}
    - {name: b, router_version: v2.4, share: 0.3}
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "seventy-thirty.duckdb"
    store = DuckDBTraceStore(path)
    traces, feedback = experiment(700, 300)  # arm a runs v2.3, arm b v2.4: a 70/30 split, as designed
    store.write_records(traces)
    store.write_records(feedback)
    store.close()
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "seventy-thirty.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: only --config names a design


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["compare", *argv, "--since", SINCE, "--until", UNTIL, "--json"]) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(("a", "b", "by"), [("a", "b", "arm"), ("v2.3", "v2.4", "version")])
def test_the_configs_arms_give_the_design_by_arm_and_by_version(
        a: str, b: str, by: str, db: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _report([a, b, "--by", by, "--db", str(db), "--config", str(config)], capsys)
    assert (data["by"], data["n_a"], data["n_b"]) == (by, 700, 300)
    assert data["shares"] == [0.7, 0.3] and data["srm_flag"] is False
    assert isinstance(data["srm_p"], float) and data["srm_p"] > 0.01
    assert "SAMPLE RATIO MISMATCH" not in str(data["verdict"]) and "unknown" not in str(data["verdict"])


def test_the_shares_of_arms_running_one_version_add_up() -> None:
    exp = ExperimentsSettings.model_validate({"arms": [
        {"name": "x1", "router_version": "v1", "share": 0.25}, {"name": "x2", "router_version": "v1", "share": 0.35},
        {"name": "y", "router_version": "v2", "share": 0.4}]})
    assert cli_compare.designed_shares(exp, "version", "v1", "v2") == pytest.approx((0.6, 0.4))
    assert cli_compare.designed_shares(exp, "arm", "x1", "y") == (0.25, 0.4)
    assert cli_compare.designed_shares(exp, "version", "v1", "v3") is None  # no arm runs v3
    assert cli_compare.designed_shares(exp, "policy", "sha256:aaaaaa", "sha256:bbbbbb") is None
    assert cli_compare.designed_shares(None, "arm", "x1", "y") is None


def _says_unknown(data: dict[str, object]) -> None:
    assert data["shares"] == [0.5, 0.5] and data["srm_flag"] is False
    assert isinstance(data["srm_p"], float) and data["srm_p"] < 1e-6  # 700/300 against 50/50, reported as such
    verdict = str(data["verdict"])
    assert verdict.startswith("designed shares unknown, assumed 50/50") and "SAMPLE RATIO MISMATCH" not in verdict


@pytest.mark.parametrize("named", [["a", "b"], ["v2.3", "v2.4"], [POLICY["a"], POLICY["b"]]],
                         ids=["arm", "version", "policy"])
def test_without_a_design_the_split_is_assumed_not_flagged(named: list[str], db: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _says_unknown(_report([*named, "--db", str(db)], capsys))


def test_not_enough_data_stays_the_verdicts_first_words(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _report(["a", "b", "--db", str(db), "--min-samples", "500"], capsys)
    verdict = str(data["verdict"])
    assert verdict.startswith("not enough data") and "; designed shares unknown, assumed 50/50" in verdict
    assert data["srm_flag"] is False


def test_a_policy_hash_has_no_design_in_the_config(db: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _says_unknown(_report([POLICY["a"], POLICY["b"], "--db", str(db), "--config", str(config)], capsys))


def test_the_table_says_the_shares_are_assumed(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "a", "b", "--since", SINCE, "--until", UNTIL, "--db", str(db)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(designed shares unknown, assumed 50/50)" in out and "SRM" not in out.replace("SRM check", "")
    assert "SAMPLE RATIO MISMATCH" not in out


def test_given_shares_are_still_checked(db: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _report(["v2.3", "v2.4", "--db", str(db), "--config", str(config), "--shares", "0.5,0.5"], capsys)
    assert data["shares"] == [0.5, 0.5] and data["srm_flag"] is True
    assert str(data["verdict"]).startswith("SAMPLE RATIO MISMATCH")


@pytest.fixture
def api(db: Path, tmp_path: Path) -> Iterator[str]:
    copy = tmp_path / "served.duckdb"
    copy.write_bytes(db.read_bytes())
    store = DuckDBTraceStore(copy)
    try:
        with served(store, tmp_path / "spool") as url:
            yield url
    finally:
        store.close()


def test_through_the_api_the_same(api: str, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    designed = _report(["v2.3", "v2.4", "--api", api, "--config", str(config)], capsys)
    assert designed["shares"] == [0.7, 0.3] and designed["srm_flag"] is False
    _says_unknown(_report(["a", "b", "--api", api], capsys))


def test_the_words_are_the_stores() -> None:
    """The CLI finds in a verdict the words the store's route writes without ``shares``."""
    assert cli_compare.UNKNOWN_SHARES == ingest_compare.UNKNOWN_SHARES
