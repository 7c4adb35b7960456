"""A port another process listens on, or a trace file another process writes: one line, exit 2, nothing left running.

The audit's defects: ``store``/``serve``/``sim fleet`` on a port in use died with an ``OSError``
traceback (exit 1), and ``store`` on a DuckDB file another store writes said ``store ready`` and
then answered every read with a 500.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from app.run.procs import free_port
from tests.duckdb_lock import duckdb_held_elsewhere

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port this test listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", free_port()))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{free_port()}"}]},
        "probes": {"enabled": False},
    }))
    return cfg


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "app", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def _one_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if not line.startswith("notice: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def _running_in(folder: Path) -> list[str]:
    """Command lines of live processes that name ``folder`` (what a serve that failed left behind)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if entry.name.isdigit() and str(folder) in cmd:
            found.append(cmd)
    return found


def test_store_on_a_port_in_use_says_so_in_one_line(taken: int, config: Path, tmp_path: Path) -> None:
    line = _one_error(_run("--config", str(config), "store", "--port", str(taken), cwd=tmp_path))
    assert f"port {taken} on 127.0.0.1 is in use (--port)" in line


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_on_a_port_in_use_says_so_and_leaves_nothing_running(taken: int, config: Path, tmp_path: Path,
                                                                    workers: str) -> None:
    line = _one_error(_run("--config", str(config), "serve", "--port", str(taken), "--workers", workers,
                           cwd=tmp_path))
    assert f"port {taken} on 127.0.0.1 is in use (--port)" in line
    assert _running_in(tmp_path) == []  # no store, Redis, prober or worker started


def test_serve_names_the_config_setting_when_the_port_came_from_it(taken: int, config: Path, tmp_path: Path) -> None:
    cfg = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**cfg, "gateway": {"port": taken}}))
    line = _one_error(_run("--config", str(config), "serve", "--workers", "1", cwd=tmp_path))
    assert f"port {taken} on 127.0.0.1 is in use (gateway.port)" in line


def test_sim_fleet_on_a_port_in_use_names_the_instance_and_the_flag(taken: int, tmp_path: Path) -> None:
    line = _one_error(_run("sim", "fleet", "--instances", "2", "--base-port", str(taken - 1), "--zero-delay",
                           cwd=tmp_path))
    assert f"port {taken} on 127.0.0.1 is in use" in line and "--base-port" in line


def test_store_on_a_file_another_process_writes_refuses_to_start(config: Path, tmp_path: Path) -> None:
    db = tmp_path / "held.duckdb"
    with duckdb_held_elsewhere(db):
        proc = _run("--config", str(config), "store", "--port", str(free_port()), "--db", str(db), cwd=tmp_path)
    line = _one_error(proc)
    assert "store ready" not in proc.stdout
    assert f"{db} (--db) is written by process " in line
