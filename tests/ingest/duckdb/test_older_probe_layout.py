"""A trace file whose ``probe_results`` has the first layout: ``ok`` (boolean) where today's has ``verdict``.

The layout of the first stores (``schemas/probe.py`` before b188e22, 2026-12-01): ``probe_id, ts,
instance, model, kind, ok, value, threshold, baseline, latency_ms, reason, error_class``, no
``verdict`` and no ``reference``. Before, a read-only open failed every probe read (``verdict``
missing) and a read-write open refused the file as written by a newer RouteLens (``ok`` unknown).
``ok`` true reads (and migrates) as the verdict ``ok``, false as ``failed``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from bench.synthetic import T0
from ingest.duckdb.store import OFFLINE, DuckDBTraceStore
from schemas.common import ProbeKind, ProbeVerdict
from schemas.probe import ProbeResult

FIRST_LAYOUT = ("probe_id", "ts", "instance", "model", "kind", "ok", "value", "threshold", "baseline", "latency_ms",
                "reason", "error_class")
KINDS = list(ProbeKind)


def results(at: datetime, n: int = 9) -> list[ProbeResult]:
    """Passing and failing runs (the first layout had no ``degraded``, nor a reference)."""
    return [ProbeResult(probe_id=f"p{i}", ts=at + timedelta(seconds=30 * i), instance=f"inst-{i % 2}", model="m",
                        kind=KINDS[i % len(KINDS)], verdict=ProbeVerdict.FAILED if i % 3 == 0 else ProbeVerdict.OK,
                        value=0.5 + i, threshold=1.0, reason="too slow" if i % 3 == 0 else "")
            for i in range(n)]


def make_first_layout(path: Path, probes: list[ProbeResult]) -> None:
    """Write ``probes`` today, then give ``probe_results`` the first layout (``ok``), as such a file holds it."""
    store = DuckDBTraceStore(path)
    try:
        store.write_records(probes)
    finally:
        store.close()
    con = duckdb.connect(str(path), config=OFFLINE)
    try:
        for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
            con.execute(f'DROP VIEW "{view}"')
        columns = ", ".join("verdict = 'ok' AS ok" if c == "ok" else c for c in FIRST_LAYOUT)
        con.execute(f"CREATE TABLE first_layout AS SELECT {columns} FROM probe_results")
        con.execute("DROP TABLE probe_results")
        con.execute("ALTER TABLE first_layout RENAME TO probe_results")
        con.execute("CREATE UNIQUE INDEX probe_results_id_key ON probe_results (probe_id)")
    finally:
        con.close()


def columns(path: Path) -> list[str]:
    con = duckdb.connect(str(path), read_only=True, config=OFFLINE)
    try:
        return [r[0] for r in con.execute("DESCRIBE probe_results").fetchall()]
    finally:
        con.close()


def migrations(path: Path) -> list[str]:
    con = duckdb.connect(str(path), read_only=True, config=OFFLINE)
    try:
        return [r[0] for r in con.execute("SELECT statement FROM routelens_migrations").fetchall()]
    finally:
        con.close()


WINDOW = (T0 - timedelta(hours=1), T0 + timedelta(hours=1))


@pytest.fixture
def old_file(tmp_path: Path) -> tuple[Path, list[ProbeResult]]:
    probes = results(T0)
    path = tmp_path / "first.duckdb"
    make_first_layout(path, probes)
    assert columns(path) == list(FIRST_LAYOUT)
    return path, probes


def test_read_only_the_probes_read_with_their_verdicts_and_the_file_stays(
        old_file: tuple[Path, list[ProbeResult]]) -> None:
    path, probes = old_file
    store = DuckDBTraceStore(path, read_only=True)
    try:
        assert store.probe_timeline(*WINDOW) == probes
        assert store.probe_timeline(*WINDOW, instance="inst-1", kind="latency") == \
            [p for p in probes if p.instance == "inst-1" and p.kind == "latency"]
        assert {p.verdict for p in store.probe_timeline(*WINDOW)} == {ProbeVerdict.OK, ProbeVerdict.FAILED}
    finally:
        store.close()
    assert columns(path) == list(FIRST_LAYOUT)


def test_a_writable_open_migrates_ok_into_the_verdict_once(old_file: tuple[Path, list[ProbeResult]]) -> None:
    path, probes = old_file
    before = len(migrations(path))
    store = DuckDBTraceStore(path)  # it refused the file as a newer version's (``ok`` unknown)
    try:
        assert store.probe_timeline(*WINDOW) == probes
        later = results(T0 + timedelta(minutes=30), 2)
        later = [p.model_copy(update={"probe_id": f"later-{p.probe_id}", "verdict": ProbeVerdict.DEGRADED})
                 for p in later]
        store.write_records(later)
        assert store.probe_timeline(*WINDOW) == sorted([*probes, *later], key=lambda p: (p.ts, p.probe_id))
    finally:
        store.close()
    assert "ok" not in columns(path) and {"verdict", "reference"} <= set(columns(path))
    done = migrations(path)[before:]
    assert ("UPDATE \"probe_results\" SET \"verdict\" = CASE WHEN \"ok\" THEN 'ok' WHEN NOT \"ok\" THEN 'failed' END"
            in done)
    DuckDBTraceStore(path).close()  # opened again: nothing left to migrate
    assert len(migrations(path)) == before + len(done)
