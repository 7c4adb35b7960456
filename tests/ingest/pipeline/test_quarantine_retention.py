"""Quarantine files follow the store's retention: a day's file goes once all it can hold is older than it.

Before, retention deleted the quarantine table's rows and never the files (one per UTC day, per process).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.run.storage import quarantine_in
from ingest.pipeline.quarantine import Quarantine
from schemas.config.storage import StorageSettings
from tests.ingest.pipeline.test_emitter import FlakySink, fast


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def day_files(folder: Path, first: datetime, days: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(days):
        (folder / f"quarantine-{(first + timedelta(days=n)):%Y-%m-%d}.jsonl").write_text("{}\n")


def test_files_older_than_the_retention_go_at_start_and_at_each_new_day(tmp_path: Path) -> None:
    folder = tmp_path / "q"
    day_files(folder, datetime(2026, 11, 20, tzinfo=UTC), 10)  # Nov 20 .. Nov 29
    (folder / "quarantine-notes.jsonl").write_text("mine\n")  # not a day file: never touched
    (folder / "other.txt").write_text("x")
    clock = Clock(datetime(2026, 12, 1, 9, 30, tzinfo=UTC))
    q = Quarantine(folder, clock, keep_days=7)
    gone = q.prune()  # cutoff Nov 24: a day's file goes once the day after it is at or before it
    assert sorted(p.name for p in gone) == [f"quarantine-2026-11-{d}.jsonl" for d in (20, 21, 22, 23)]
    assert sorted(p.name for p in folder.iterdir())[:2] == ["other.txt", "quarantine-2026-11-24.jsonl"]
    assert (folder / "quarantine-notes.jsonl").exists()
    q.record(kind="trace", source="test", reason="bad", raw=b"{}")  # the same day: nothing more to prune
    assert (folder / "quarantine-2026-11-24.jsonl").exists()
    clock.at += timedelta(days=2)  # Dec 3: the first record of the day prunes Nov 24 and 25
    q.record(kind="trace", source="test", reason="bad", raw=b"{}")
    names = sorted(p.name for p in folder.glob("quarantine-2*.jsonl"))
    assert names[0] == "quarantine-2026-11-26.jsonl" and names[-1] == "quarantine-2026-12-03.jsonl"


def test_without_retention_every_file_is_kept_and_the_backend_decides_the_days(tmp_path: Path) -> None:
    folder = tmp_path / "q"
    day_files(folder, datetime(2020, 1, 1, tzinfo=UTC), 3)
    assert Quarantine(folder, keep_days=None).prune() == [] and len(list(folder.iterdir())) == 3
    assert quarantine_in(StorageSettings(), folder).keep_days is None  # DuckDB's default: kept for ever
    assert quarantine_in(StorageSettings(retention_days=14), folder).keep_days == 14
    es = StorageSettings.model_validate({"backend": "elasticsearch", "retention_days": 14,
                                         "elasticsearch": {"retention_days": 30}})
    assert quarantine_in(es, folder).keep_days == 30  # the data streams' lifecycle


def test_a_pipeline_prunes_its_quarantine_folder_when_it_starts(tmp_path: Path) -> None:
    folder = tmp_path / "q"
    old = datetime.now(UTC) - timedelta(days=40)
    day_files(folder, old, 2)
    emitter = fast(FlakySink(), tmp_path / "spool", quarantine=Quarantine(folder, keep_days=30))
    try:
        assert list(folder.iterdir()) == []
    finally:
        emitter.close()
