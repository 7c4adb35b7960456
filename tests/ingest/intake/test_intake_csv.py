"""A CSV file is refused whole, in one line naming the formats taken (found by an audit of losing nothing).

``routelens ingest import FILE.csv`` read the file as JSONL and quarantined every line as
"malformed JSON". The docs promise JSONL and Parquet only, so a CSV file is refused before any
of it is read: nothing is stored, nothing quarantined, exit 2. Converted to Parquet it imports.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from app.cli import main
from ingest.duckdb.store import DuckDBTraceStore

EPOCH, FAR = datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC)
CSV = ("id,timestamp,model,duration_ms,status_code,prompt\n"
       "csv-1,2026-11-01T00:00:00Z,gpt-4o-mini,812.5,200,hello there\n"
       "csv-2,2026-11-01T00:00:01Z,gpt-4o-mini,90,500,another question\n")


@pytest.mark.parametrize("name", ["logs.csv", "LOGS.CSV", "logs.tsv"])
def test_a_csv_file_is_refused_up_front_naming_the_formats_taken(tmp_path: Path, name: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / name
    src.write_text(CSV)
    db = tmp_path / "t.duckdb"
    assert main(["ingest", "import", str(src), "--db", str(db), "--mapping", "generic"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "lines" not in out.err
    message = " ".join(out.err.split())  # one line, however the console wraps it
    assert f"{src}: " in message and "files are not imported; give JSONL/NDJSON" in message
    assert "Parquet (.parquet, .pq)" in message
    assert not db.exists()  # refused before the store is opened (or created)


def test_the_same_rows_as_parquet_import_with_the_generic_mapping(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "logs.csv").write_text(CSV)
    con = duckdb.connect()
    con.execute(f"COPY (FROM '{tmp_path / 'logs.csv'}') TO '{tmp_path / 'logs.parquet'}'")  # the way the message says
    con.close()
    db = tmp_path / "t.duckdb"
    assert main(["ingest", "import", str(tmp_path / "logs.parquet"), "--db", str(db), "--mapping", "generic"]) == 0
    assert "accepted 2  rejected 0  stored 2" in capsys.readouterr().out
    store = DuckDBTraceStore(db, read_only=True)
    got = store.get("csv-2")
    store.close()
    assert got is not None and got.outcome.http_status == 500 and got.selected_model == "gpt-4o-mini"
