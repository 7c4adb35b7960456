"""Bad input to ``ingest import``: a bad mapping or a corrupt Parquet file is one ``error:`` line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main


@pytest.fixture(autouse=True)
def _here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: default storage


def _one_error_line(err: str, *words: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), err


@pytest.mark.parametrize(("mapping", "words"), [
    (["selected_model"], ("map.json", "JSON object", "list")),
    ({"selected_model": "model"}, ("map.json", "'selected_model'", "list")),
    ({"selected_modle": ["model"]}, ("map.json", "'selected_modle'", "unknown target")),
    ({"outcome.total_ms": [1]}, ("map.json", "'outcome.total_ms'", "list")),
])
def test_a_bad_mapping_names_the_key(mapping: object, words: tuple[str, ...], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "map.json").write_text(json.dumps(mapping))
    (tmp_path / "logs.jsonl").write_text('{"id": "r1", "model": "m", "duration_ms": 5}\n')
    db = tmp_path / "t.duckdb"
    assert main(["ingest", "import", "logs.jsonl", "--mapping", "map.json", "--db", str(db)]) == 2
    _one_error_line(capsys.readouterr().err, "--mapping", *words)
    assert not db.exists()  # refused before the store is opened


def test_a_corrupt_parquet_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"this is not parquet at all\n" * 10)
    assert main(["ingest", "import", "bad.parquet", "--db", str(tmp_path / "t.duckdb")]) == 2
    _one_error_line(capsys.readouterr().err, "bad.parquet", "Parquet")


def test_a_good_custom_mapping_still_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "map.json").write_text(json.dumps({"selected_model": ["routed_to"]}))
    (tmp_path / "logs.jsonl").write_text(
        '{"id": "r1", "routed_to": "m", "duration_ms": 5, "timestamp": "2026-01-01T00:00:00Z", "prompt": "hi"}\n')
    code = main(["ingest", "import", "logs.jsonl", "--mapping", "map.json", "--db", str(tmp_path / "t.duckdb")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "accepted 1" in out
