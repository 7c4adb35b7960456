"""``routelens store`` and ``routelens probes run`` at start: open only on loopback, as ``serve``.

Off loopback, each open surface is refused before anything is opened or bound: exit 2 and one
error line naming the setting or variable to set. On loopback, a notice per open surface. The
server itself is replaced by a recorder: these tests are about what happens before it starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import main
from app.run.access import access_notices
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError

FLEET = {"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]}}
TOKENS = {"storage": {"read_token_env": "RL_T_READ", "intake_token_env": "RL_T_INTAKE"}}
RELAY = "ROUTELENS_RELAY_TOKEN"


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the store and the prober would have built and served: recorded, never run."""
    import app.run.probe_service as probe_service
    import app.run.store as store

    seen: list[dict[str, Any]] = []
    monkeypatch.delenv(RELAY, raising=False)
    monkeypatch.setattr(store, "build_store_app", lambda config, db: seen.append({"built": db}) or "app")
    monkeypatch.setattr(probe_service, "build_probe_app",
                        lambda config, **kw: seen.append({"built": kw}) or "app")
    for module in (store, probe_service):
        monkeypatch.setattr(module.web, "run_app", lambda app, host, port, **_: seen.append({"host": host}))
    return seen


def config_file(tmp_path: Path, body: dict[str, Any]) -> str:
    path = tmp_path / "routelens.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def store(cfg: str, host: str, tmp_path: Path) -> int:
    return main(["--config", cfg, "store", "--host", host, "--port", "1", "--db", str(tmp_path / "t.duckdb")])


def prober(cfg: str, host: str, *more: str) -> int:
    return main(["--config", cfg, "probes", "run", "--host", host, "--port", "1", *more])


def one_error(err: str) -> str:
    lines = " ".join(err.split())  # rich wraps at the console's width: the words are what counts
    assert err.startswith("error: ") and err.count("error:") == 1, err
    return lines


def test_an_open_store_off_loopback_is_refused_naming_each_token(
        tmp_path: Path, started: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    assert store(config_file(tmp_path, FLEET), "0.0.0.0", tmp_path) == 2
    err = one_error(capsys.readouterr().err)
    assert "0.0.0.0 is not a loopback address" in err
    for setting in ("storage.read_token_env", "storage.intake_token_env", RELAY):
        assert setting in err
    assert started == [] and [p.name for p in tmp_path.iterdir()] == ["routelens.yaml"]  # nothing opened


def test_an_open_store_on_loopback_says_so_and_tokens_let_it_listen_anywhere(
        tmp_path: Path, started: list[dict[str, Any]], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert store(config_file(tmp_path, FLEET), "127.0.0.1", tmp_path) == 0
    notices = capsys.readouterr().err.splitlines()
    assert len(notices) == 3 and all(n.startswith("notice: ") and "loopback 127.0.0.1" in n for n in notices)
    assert "POST /v1/internal/records" in notices[2] and RELAY in notices[2]
    assert started[-1] == {"host": "127.0.0.1"}

    cfg = config_file(tmp_path, FLEET | TOKENS)
    monkeypatch.setenv("RL_T_READ", "r")
    monkeypatch.setenv("RL_T_INTAKE", "i")
    assert store(cfg, "0.0.0.0", tmp_path) == 2  # the relay route is still open
    assert RELAY in one_error(capsys.readouterr().err)
    monkeypatch.setenv(RELAY, "relay")
    assert store(cfg, "0.0.0.0", tmp_path) == 0
    assert capsys.readouterr().err == "" and started[-1] == {"host": "0.0.0.0"}


def test_a_named_intake_token_that_is_unset_refuses_the_store_even_on_loopback(
        tmp_path: Path, started: list[dict[str, Any]], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RL_T_READ", "r")
    monkeypatch.delenv("RL_T_INTAKE", raising=False)
    assert store(config_file(tmp_path, FLEET | TOKENS), "127.0.0.1", tmp_path) == 2  # it started open before
    assert "RL_T_INTAKE, which is unset or empty" in one_error(capsys.readouterr().err)
    assert started == []


def test_an_open_prober_off_loopback_is_refused_with_or_without_a_store(
        tmp_path: Path, started: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config_file(tmp_path, FLEET)
    assert prober(cfg, "0.0.0.0", "--store-url", "http://127.0.0.1:9") == 2
    err = one_error(capsys.readouterr().err)
    assert "storage.read_token_env" in err and "the prober's API (verdicts, alerts, stats)" in err
    assert "intake" not in err
    assert prober(cfg, "0.0.0.0") == 2  # owning the store, it serves its query API and intake too
    err = one_error(capsys.readouterr().err)
    assert "storage.read_token_env" in err and "storage.intake_token_env" in err
    assert started == []


def test_an_open_prober_on_loopback_says_so_and_tokens_let_it_listen_anywhere(
        tmp_path: Path, started: list[dict[str, Any]], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert prober(config_file(tmp_path, FLEET), "127.0.0.1", "--store-url", "http://127.0.0.1:9") == 0
    (notice,) = capsys.readouterr().err.splitlines()
    assert notice.startswith("notice: the prober's API (verdicts, alerts, stats) is open (no storage.read_token_env)")
    monkeypatch.setenv("RL_T_READ", "r")
    monkeypatch.setenv("RL_T_INTAKE", "i")
    cfg = config_file(tmp_path, FLEET | TOKENS)
    assert prober(cfg, "0.0.0.0", "--store-url", "http://127.0.0.1:9") == 0
    assert prober(cfg, "0.0.0.0") == 0
    assert capsys.readouterr().err == "" and [s for s in started if "host" in s] == [{"host": "127.0.0.1"},
                                                                                 {"host": "0.0.0.0"},
                                                                                 {"host": "0.0.0.0"}]


def test_serve_refuses_an_open_intake_on_a_keyed_gateway() -> None:
    """The gateway's keys guard its own routes only: POST /v1/traces takes storage.intake_token_env."""
    keyed = RouteLensConfig.model_validate(FLEET | {"gateway": {"api_keys_env": "GW"},
                                                    "storage": {"read_token_env": "READ"}})
    env = {"GW": "k", "READ": "r"}
    with pytest.raises(ConfigError, match="storage.intake_token_env: unset, and 0.0.0.0 is not a loopback") as exc:
        access_notices(keyed, "0.0.0.0", env)
    assert "\n" not in str(exc.value)
    guarded = keyed.model_copy(update={"storage": keyed.storage.model_copy(update={"intake_token_env": "IN"})})
    assert access_notices(guarded, "0.0.0.0", env | {"IN": "i"}) == []
    with pytest.raises(ConfigError, match="IN, which is unset"):
        access_notices(guarded, "127.0.0.1", env)  # named but unset: refused, not open
