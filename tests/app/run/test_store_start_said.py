"""The process that owns the trace store says at start which file it is, its size, and how long traces stay.

Found by a soak audit: ``storage.retention_days`` defaults to null, so the DuckDB file grows without
limit (13-28 GB a day at 100 requests/s), and nothing said so. The default stays; the start says it.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from app.run.storage import open_store, say_store
from app.run.store import build_store_app
from schemas.config.storage import StorageSettings
from tests.app.run.test_backlog_said import started_and_stopped
from tests.app.run.test_storage_health import config


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("trace store: ")]


def test_the_store_process_says_its_file_its_size_and_that_traces_are_kept_for_ever(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.duckdb"
    open_store(StorageSettings(), str(db), lazy=False).close()  # a file that exists (a one-off open says nothing)
    assert _lines(capsys.readouterr().out) == []
    size = db.stat().st_size
    assert size > 0
    app = build_store_app(config(tmp_path, tmp_path / "spool"), str(db))
    lines = _lines(capsys.readouterr().out)
    asyncio.run(started_and_stopped(app))  # its pipeline's threads end with it
    assert len(lines) == 1, lines
    match = re.fullmatch(rf"trace store: {re.escape(str(db.resolve()))} \((\d+(?:\.\d)?) (KB|MB)\), "
                         r"traces kept for ever: set storage\.retention_days", lines[0])
    assert match is not None, lines[0]
    shown = float(match[1]) * {"KB": 2**10, "MB": 2**20}[match[2]]
    assert abs(shown - size) <= 0.05 * size


def test_a_retention_and_a_new_file_are_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "new.duckdb"
    say_store(StorageSettings(retention_days=30), str(db))
    assert _lines(capsys.readouterr().out) == [
        f"trace store: {db.resolve()} (new), traces kept 30 days (storage.retention_days; the file does not shrink)"]


def test_elasticsearch_names_its_own_retention(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    say_store(StorageSettings(backend="elasticsearch"), str(tmp_path / "t.duckdb"))
    assert _lines(capsys.readouterr().out) == [
        "trace store: Elasticsearch at http://127.0.0.1:9200 (data streams routelens-*), traces kept 30 days "
        "(storage.elasticsearch.retention_days)"]
