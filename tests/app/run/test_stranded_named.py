"""With the store in serve's process, the spools of workers it does not run are named only when they hold records.

A clean stop of ``serve --workers 2`` empties worker 1's spool but leaves its folder; ``serve
--store-in-process`` (one worker) had warned of undelivered records on every start after it.
"""

from __future__ import annotations

from pathlib import Path

from app.run.storage import worker_paths
from app.run.stranded import deliver_stranded
from ingest import spool_backlog
from ingest.spool.durable_spool import DurableSpool
from schemas.config.storage import StorageSettings


def _spool(folder: Path, records: int) -> None:
    spool = DurableSpool(folder, segment_bytes=1 << 16)
    try:
        for seq in range(records):
            spool.append(seq, 1, b'{"request_id":"req_%d"}' % seq)
        spool.flush()
    finally:
        spool.close()


def test_an_emptied_spool_is_not_named_and_one_holding_records_is_with_its_count(tmp_path: Path) -> None:
    st, db = StorageSettings(), str(tmp_path / "traces.duckdb")
    emptied, held = worker_paths(st, db, 1)[0], worker_paths(st, db, 2)[0]
    _spool(emptied, 0)
    _spool(held, 3)
    assert (spool_backlog(emptied), spool_backlog(held), spool_backlog(tmp_path / "none")) == (0, 3, 0)
    said: list[str] = []
    assert deliver_stranded(st, db, 1, None, said.append) == []
    assert said == ["warning: the spools of gateway-2 hold 3 records this serve does not deliver (the store is in "
                    "its process); serve with --workers 3 and a store process to deliver them"]
    assert spool_backlog(held) == 3  # counted, not taken


def test_no_warning_when_every_left_spool_is_empty(tmp_path: Path) -> None:
    st, db = StorageSettings(), str(tmp_path / "traces.duckdb")
    _spool(worker_paths(st, db, 1)[0], 0)
    said: list[str] = []
    assert deliver_stranded(st, db, 1, None, said.append) == [] and said == []
