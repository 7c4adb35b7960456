"""app.run.storage: where the spool and the quarantine of a store live."""

from __future__ import annotations

from pathlib import Path

from app.run.storage import pipeline_paths
from schemas.config.storage import StorageSettings


def test_duckdb_defaults_sit_next_to_the_file(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    assert pipeline_paths(StorageSettings(), str(db)) == (
        tmp_path / "traces.duckdb.spool",
        tmp_path / "traces.duckdb.quarantine",
    )


def test_configured_folders_win(tmp_path: Path) -> None:
    st = StorageSettings.model_validate(
        {"spool": {"dir": str(tmp_path / "s")}, "quarantine_dir": str(tmp_path / "q")}
    )
    assert pipeline_paths(st, str(tmp_path / "t.duckdb")) == (tmp_path / "s", tmp_path / "q")


def test_elasticsearch_keeps_its_pipeline_beside_the_duckdb_folder(tmp_path: Path) -> None:
    st = StorageSettings.model_validate({"backend": "elasticsearch", "duckdb_path": str(tmp_path / "d" / "t.duckdb")})
    spool, quarantine = pipeline_paths(st, "ignored.duckdb")
    assert (spool, quarantine) == (tmp_path / "d" / "elasticsearch.spool", tmp_path / "d" / "elasticsearch.quarantine")
