"""app.run.procs: free ports, waiting for HTTP, and child processes in their own group."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.run.procs import (
    TAIL_LINES,
    Child,
    app_command,
    free_port,
    free_ports,
    port_is_free,
    reserve_ports,
    stat_fields,
    wait_http,
)
from tests.app import stub_trace_api as stub


def test_a_free_port_is_free_until_someone_listens() -> None:
    port = free_port()
    assert port_is_free("127.0.0.1", port)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not port_is_free("127.0.0.1", port)


def test_free_ports_are_distinct() -> None:
    ports = free_ports(40)
    assert len(set(ports)) == 40 and all(port_is_free("127.0.0.1", p) for p in ports)


def test_a_port_handed_out_or_reserved_is_not_handed_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two picks a moment apart (serve: the store's port, then the workers') never give the same port.

    Each was free "right now", and the one whose server bound it later found it in use: the random
    draw is made to offer the same ports every time, as a collision would.
    """
    offered = random.Random(7).sample(range(20000, 30000), 60)
    offered = [p for p in offered if port_is_free("127.0.0.1", p)][:50]
    monkeypatch.setattr("app.run.procs.random.sample", lambda population, k: list(offered))
    reserve_ports(offered[0])  # a gateway's configured port, not bound yet
    first, second = free_port(), free_port()
    assert offered[0] not in (first, second) and first != second
    assert first == offered[1] and second == offered[2]  # the next ones offered, each free


def test_wait_http_sees_a_200(stub_api: stub.StubTraceApi) -> None:
    assert wait_http(f"{stub_api.url}/v1/traces/{stub.SAMPLE_REQUEST_ID}", 10)


def test_wait_http_gives_up_when_the_process_died(closed_port_url: str) -> None:
    assert not wait_http(f"{closed_port_url}/health", 30, alive=lambda: False)


def test_child_ready_on_its_marker_and_stopped_with_its_group() -> None:
    code = "print('booting'); print('thing ready', flush=True); import time; time.sleep(120)"
    child = Child("thing", [sys.executable, "-c", code], {}, "thing ready")
    try:
        assert child.wait_ready(30)
        assert child.alive()
    finally:
        child.stop()
    assert not child.alive()


def test_child_that_exits_before_its_marker_is_not_ready() -> None:
    child = Child("quitter", [sys.executable, "-c", "print('bye')"], {}, "never printed")
    assert not child.wait_ready(30)
    child.stop()  # already gone: nothing to do
    assert not child.alive()


def test_a_child_that_failed_to_start_keeps_its_last_lines_for_the_message() -> None:
    code = (f"for i in range({TAIL_LINES + 5}): print('line', i, flush=True)\n"
            "raise SystemExit('OSError: address already in use')")
    child = Child("quitter", [sys.executable, "-c", code], {}, "never printed")
    assert not child.wait_ready(30)
    lines = child.tail().splitlines()
    assert len(lines) == TAIL_LINES and lines[0] == "line 6"
    assert lines[-1] == "OSError: address already in use"


def test_stat_fields_start_with_the_state_and_are_none_for_a_process_that_is_gone() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        fields = stat_fields(child.pid)
        assert fields is not None and fields[0] in "RSD" and int(fields[1]) == os.getpid()  # state, then parent
    finally:
        child.kill()
        child.wait()
    assert stat_fields(child.pid) is None  # reaped: no /proc entry


def test_a_child_runs_our_code_not_the_working_folders(tmp_path: Path) -> None:
    # A container's /srv holds the sources beside the installed package: `python -m app` there would
    # import the sources (no compiled extensions). A child runs the code its parent runs.
    decoy = tmp_path / "app"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("")
    (decoy / "__main__.py").write_text('print("the working folder\'s app")\n')
    py, env = app_command({"PATH": "/usr/bin:/bin"})
    out = subprocess.run([*py, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "working folder" not in out.stdout and "routelens" in out.stdout
