"""Paths in a configuration are the config file's, resolved once at load time (router_core.config_file)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from router_core.config_file import read_config
from router_core.experiments.arms import load_policy
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.paths import path_context
from schemas.yamlconf import parse_yaml_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def own_folder(tmp_path: Path) -> Path:
    """The shipped config with its policy and routes, in a folder of its own."""
    folder = tmp_path / "conf"
    (folder / "policies").mkdir(parents=True)
    (folder / "intents").mkdir()
    shutil.copy(ROOT / "policies" / "seed000.yaml", folder / "policies" / "main.yaml")
    shutil.copy(ROOT / "data" / "intents" / "routelens_routes.yaml", folder / "intents" / "routes.yaml")
    shutil.copy(ROOT / "policies" / "seed003.yaml", folder / "policies" / "arm.yaml")
    (folder / "routelens.yaml").write_text(
        "fleet:\n"
        "  instances:\n"
        "    - {id: a, model: m, url: 'http://127.0.0.1:9'}\n"
        "routing:\n"
        "  policy: policies/main.yaml\n"
        "  intents: {routes: intents/routes.yaml}\n"
        "storage:\n"
        "  duckdb_path: data/traces.duckdb\n"
        "  spool: {dir: spool}\n"
        "experiments:\n"
        "  arms:\n"
        "    - {name: a, router_version: v1, share: 1, policy: policies/arm.yaml}\n"
    )
    return folder


@pytest.mark.parametrize("cwd", ["/", "tmp", "folder"])
def test_a_config_loads_from_any_working_directory(own_folder: Path, cwd: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir({"/": Path("/"), "tmp": own_folder.parent, "folder": own_folder}[cwd])
    config = read_config(own_folder / "routelens.yaml" if cwd != "folder" else "routelens.yaml")
    assert config.routing.policy == str(own_folder / "policies" / "main.yaml")
    assert config.routing.intents is not None
    assert config.routing.intents.routes == str(own_folder / "intents" / "routes.yaml")
    assert config.storage.duckdb_path == str(own_folder / "data" / "traces.duckdb")
    assert config.storage.spool.dir == str(own_folder / "spool")
    assert config.experiments is not None
    assert config.experiments.arms[0].policy == str(own_folder / "policies" / "arm.yaml")


def test_a_derived_config_written_elsewhere_keeps_its_files(own_folder: Path, tmp_path: Path) -> None:
    """What the demo does: load, change ports, write the result into another folder, load that."""
    config = read_config(own_folder / "routelens.yaml")
    derived = tmp_path / "elsewhere" / "demo-config.yaml"
    derived.parent.mkdir()
    derived.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    assert read_config(derived) == config


@pytest.mark.parametrize(("field", "line", "missing"), [
    ("routing.policy", 5, "policies/main.yaml"),
    ("routing.intents.routes", 6, "intents/routes.yaml"),
    ("experiments.arms[0].policy", 12, "policies/arm.yaml"),
])
def test_a_missing_file_names_file_line_and_field(own_folder: Path, field: str, line: int, missing: str) -> None:
    (own_folder / missing).unlink()
    with pytest.raises(ConfigError) as info:
        read_config(own_folder / "routelens.yaml")
    text = str(info.value)
    assert f"{own_folder / 'routelens.yaml'}:{line}: {field}: cannot read {own_folder / missing}: " in text, text
    assert "No such file or directory" in text


def test_a_folder_where_a_file_belongs_is_unreadable(own_folder: Path) -> None:
    (own_folder / "intents" / "routes.yaml").unlink()
    (own_folder / "intents" / "routes.yaml").mkdir()
    with pytest.raises(ConfigError, match=r"routing\.intents\.routes: cannot read .*: Is a directory"):
        read_config(own_folder / "routelens.yaml")


def test_output_paths_need_not_exist(own_folder: Path) -> None:
    config = read_config(own_folder / "routelens.yaml")
    assert not Path(config.storage.duckdb_path).exists()


def test_without_the_loaders_context_paths_stay_as_given() -> None:
    config = RouteLensConfig.model_validate({"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://x:1"}]},
                                             "routing": {"policy": "p.yaml"}})
    assert config.routing.policy == "p.yaml" and config.storage.duckdb_path == ".routelens/traces.duckdb"


def test_the_context_resolves_without_checking_when_told_nothing_about_the_disk(tmp_path: Path) -> None:
    text = "fleet: {instances: [{id: a, model: m, url: 'http://x:1'}]}\nrouting: {policy: nowhere.yaml}\n"
    config = parse_yaml_model(RouteLensConfig, text, context=path_context(tmp_path))
    assert config.routing.policy == str(tmp_path / "nowhere.yaml")


def test_an_arm_policy_file_is_found_from_its_base_folder_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "arm.yaml").write_text("scoring: {preset: seed-instance-score}\n")
    monkeypatch.chdir(tmp_path)  # arm.yaml is not here
    assert load_policy("arm.yaml", tmp_path / "p").scoring is not None


def test_a_trace_file_left_in_the_working_folder_is_warned_of(own_folder: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """Found by an upgrade audit: before 2026-12-04 relative paths were the working folder's; a serve run
    from there with the config elsewhere began an empty store, in silence, beside the old one."""
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    (run / "data" / "traces.duckdb").write_bytes(b"old")
    monkeypatch.chdir(run)
    with caplog.at_level("WARNING", logger="router_core.config_file"):
        config = read_config(own_folder / "routelens.yaml")
    assert config.storage.duckdb_path == str(own_folder / "data" / "traces.duckdb")  # still the config's folder
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"data/traces.duckdb resolves beside the configuration, to {own_folder / 'data' / 'traces.duckdb'}" in said
    assert str(run / "data" / "traces.duckdb") in said
    caplog.clear()
    (own_folder / "data").mkdir()
    (own_folder / "data" / "traces.duckdb").write_bytes(b"new")  # the configured one exists: nothing to say
    with caplog.at_level("WARNING", logger="router_core.config_file"):
        read_config(own_folder / "routelens.yaml")
    assert caplog.records == []
