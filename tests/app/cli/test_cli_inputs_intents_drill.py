"""Bad input to ``intents add`` and ``drill run``: one ``error:`` line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from router_core.intents.routes import append_examples
from schemas.errors import ConfigError

ROUTES = "# kept header\na:\n  - one\n"


@pytest.fixture(autouse=True)
def _here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here


def _one_error_line(err: str, *words: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), err


def test_add_a_binary_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    routes, blob = tmp_path / "routes.yaml", tmp_path / "blob.bin"
    routes.write_text(ROUTES)
    blob.write_bytes(b"\xff\xfe\x00\x81binary")
    assert main(["intents", "add", "b", str(blob), "--routes", str(routes)]) == 2
    _one_error_line(capsys.readouterr().err, "blob.bin", "UTF-8")
    assert routes.read_text() == ROUTES


def test_add_with_no_configuration_and_no_routes_names_what_to_give(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # it once appended to data/intents/routelens_routes.yaml under the working folder: a new one-route file
    utt = tmp_path / "utt.txt"
    utt.write_text("turn the lights on\n")
    assert main(["intents", "add", "lights", str(utt)]) == 2
    _one_error_line(capsys.readouterr().err, "--routes", "--config")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["utt.txt"]


@pytest.mark.parametrize("route", ["", "   "])
def test_add_an_empty_route_name_leaves_the_file_untouched(route: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    routes, utt = tmp_path / "routes.yaml", tmp_path / "utt.txt"
    routes.write_text(ROUTES)
    utt.write_text("two\nthree\n")
    assert main(["intents", "add", route, str(utt), "--routes", str(routes)]) == 2
    _one_error_line(capsys.readouterr().err, "ROUTE", "non-empty")
    assert routes.read_text() == ROUTES


def test_append_examples_refuses_an_empty_name_before_writing(tmp_path: Path) -> None:
    routes = tmp_path / "routes.yaml"
    routes.write_text(ROUTES)
    with pytest.raises(ConfigError, match="non-empty"):
        append_examples(routes, "", ["two"])
    assert routes.read_text() == ROUTES
    assert list(tmp_path.iterdir()) == [routes]


def test_append_examples_writes_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while writing leaves the old file whole and no temporary file behind."""
    import os

    routes = tmp_path / "routes.yaml"
    routes.write_text(ROUTES)

    def broken(src: str, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(ConfigError, match="cannot write"):
        append_examples(routes, "b", ["two"])
    assert routes.read_text() == ROUTES
    assert list(tmp_path.iterdir()) == [routes]
    monkeypatch.undo()
    assert append_examples(routes, "b", ["two"])["b"] == ["two"]
    assert routes.read_text().startswith("# kept header\n") and '"b":' in routes.read_text()


def test_drill_missing_scenario_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drill", "run", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "out")]) == 2
    _one_error_line(capsys.readouterr().err, "nope.yaml")
    assert not (tmp_path / "out").exists()  # refused before any work


def test_drill_out_naming_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "taken"
    taken.write_text("keep me")
    scenario = Path(__file__).resolve().parents[3] / "sim/scenarios/crash.yaml"
    assert main(["drill", "run", str(scenario), "--out", str(taken)]) == 2
    _one_error_line(capsys.readouterr().err, "--out", "taken")
    assert taken.read_text() == "keep me"
