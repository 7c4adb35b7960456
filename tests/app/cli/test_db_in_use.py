"""A DuckDB file a running process writes, read with ``--db``: one line naming the holder and ``--api``.

The audit's defect: ``trace ID --db F`` and ``replay --verify --db F`` (``compare --db F`` too) on a
file a running server writes printed DuckDB's ``IO Error: Could not set lock on file ... Conflicting
lock is held in .../python3.11 (PID 32495)`` and nothing about what to do. Here the test process
holds the file open for writing, as a server does, and each command runs as a real subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

from app.cli._common import written_elsewhere
from app.run.procs import free_port
from ingest import DuckDBTraceStore

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e
WINDOW = ["--since", "2026-01-01T00:00:00Z", "--until", "2027-01-01T00:00:00Z"]


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Path]:
    """A trace file this process has open for writing (the lock a running server holds)."""
    db = tmp_path / "traces.duckdb"
    DuckDBTraceStore(db).close()  # a real trace file: its schema, no traces
    con = duckdb.connect(str(db))
    try:
        yield db
    finally:
        con.close()


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ROUTELENS_API_URL", "ROUTELENS_DB")}
    env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "app", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def _in_use_line(proc: subprocess.CompletedProcess[str], db: Path) -> str:
    """The one ``error:`` line of a refused read, checked to name the file, this process and ``--api``."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    line = lines[0]
    assert f"{db} is in use by another process (PID {os.getpid()}): a running RouteLens gateway or store? " \
           "read it through that process instead with --api URL" in line, line
    assert "IO Error" not in line and "Conflicting lock" not in line, line
    return line


COMMANDS = {
    "trace": ["trace", "req-1"],
    "replay --verify": ["replay", "--verify", *WINDOW],
    "replay --policy": ["replay", "--policy", "policy.yaml", *WINDOW],  # written beside, in the working folder
    "compare": ["compare", "a", "b", *WINDOW],
}


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_file_a_process_writes_is_refused_in_one_line_naming_it_and_api(held: Path, tmp_path: Path,
                                                                         argv: list[str]) -> None:
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(  # a whole routelens.yaml: one instance
        {"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]}}))
    line = _in_use_line(_run(*argv, "--db", str(held), cwd=tmp_path), held)
    assert line.startswith(("error: cannot read traces: ", "error: cannot read the traces: ")), line


def test_trace_falling_back_to_the_configured_file_says_both_why(held: Path, tmp_path: Path) -> None:
    """No server at the configured gateway, and its file held: the line says each, and where to read instead."""
    port = free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({"gateway": {"port": port}, "storage": {"duckdb_path": str(held)},
                                   "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]}}))
    line = _in_use_line(_run("--config", str(cfg), "trace", "req-1", cwd=tmp_path), held)
    assert f"http://127.0.0.1:{port} is unreachable" in line, line


def test_the_same_file_reads_once_no_process_writes_it(tmp_path: Path) -> None:
    """The control: the refusal above is the lock's (unheld, the file answers: an unknown id, exit 1)."""
    db = tmp_path / "traces.duckdb"
    DuckDBTraceStore(db).close()
    proc = _run("trace", "req-1", "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 1 and "no trace for request_id 'req-1'" in proc.stderr, proc.stderr


def test_app_warns_before_it_starts_on_a_file_a_process_writes(held: Path, tmp_path: Path) -> None:
    """``app --db`` still starts (its pages try again on each rerun), after one warning line saying the same."""
    env = {k: v for k, v in os.environ.items() if k not in ("ROUTELENS_API_URL", "ROUTELENS_DB")}
    proc = subprocess.Popen([sys.executable, "-m", "app", "app", "--db", str(held), "--port", str(free_port())],
                            cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        started = proc.stdout.readline()  # "app http://..." is printed after the check, before Streamlit runs
        assert started.startswith("app http://"), started
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    warning = (err.strip().splitlines() or ["(nothing on stderr)"])[0]
    assert warning.startswith("warning: ") and f"{held} is in use by another process (PID " \
        f"{os.getpid()}): a running RouteLens gateway or store? read it through that process instead with " \
        "--api URL" in warning, err


def test_the_wording_needs_no_pid_and_leaves_other_errors_alone() -> None:
    no_pid = OSError('IO Error: Could not set lock on file "/x/t.duckdb": Conflicting lock is held elsewhere')
    assert written_elsewhere(no_pid) == ("/x/t.duckdb is in use by another process: a running RouteLens gateway or "
                                         "store? read it through that process instead with --api URL (its "
                                         "gateway's or store's address)")
    assert written_elsewhere(OSError("cannot open /x/t.duckdb: not a DuckDB file")) is None
