"""``sim traffic``/``sim fault``/``sim fleet`` argument errors: one line naming the flag, exit 2, before any run.

The audit's defects: raw pydantic (``rps / Input should be greater than 0 [type=...]``), the
internal field ``session_share`` for ``--sessions``, a multi-line ``--mix``, ``--duration -2``
exiting 0 after 0 requests, ``--json`` into a missing folder failing after the whole run, and
``--factor -2`` not naming ``--factor``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main
from app.run.procs import free_port

ROOT = Path(__file__).resolve().parents[3]

# a gateway nobody listens on: every case must be refused before traffic is sent
API = f"http://127.0.0.1:{free_port()}"

TRAFFIC = [
    (["--rps", "0"], "error: --rps must be > 0"),
    (["--rps", "9000"], "error: --rps must be <= 5000"),
    (["--sessions", "2"], "error: --sessions must be <= 1"),
    (["--stream", "-1"], "error: --stream must be >= 0"),
    (["--amplitude", "3"], "error: --amplitude must be <= 1"),
    (["--max-requests", "0"], "error: --max-requests must be >= 1"),
    (["--mix", "foo=1"], "error: --mix: 'foo' is not a query class"),
    (["--mix", "ticket"], "error: --mix: 'ticket' is not CLASS=WEIGHT"),
    (["--mix", "ticket=x"], "error: --mix: 'ticket=x' is not CLASS=WEIGHT"),
    (["--curve", "surge"], "error: a surge curve needs --surge-start"),
    (["--duration", "-2"], "error: --duration must be > 0"),
    (["--duration", "0"], "error: --duration must be > 0"),
    (["--json", "/nonexistent/dir/x.json"], "error: cannot write the summary to /nonexistent/dir/x.json (--json)"),
]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "pydantic" not in err and "type=" not in err and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(("extra", "expected"), TRAFFIC, ids=[" ".join(a) for a, _ in TRAFFIC])
def test_traffic_refuses_bad_options_in_one_line_naming_the_flag(extra: list[str], expected: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "traffic", "--api", API, *extra]) == 2
    assert _one_line(capsys).startswith(expected)


def test_traffic_refuses_a_json_path_that_is_a_folder(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "traffic", "--api", API, "--json", str(tmp_path)]) == 2
    assert _one_line(capsys).endswith("(--json): it is a folder")


@pytest.fixture(scope="module")
def instance() -> Iterator[str]:
    """One simulated instance's URL (the instance refuses a bad fault; the CLI names the flag)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "sim", "fleet", "--instances", "1", "--base-port",
                             str(port), "--zero-delay"], cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline().strip() for _ in range(2)]
    try:
        assert lines[-1] == "fleet ready", lines
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


FAULT = [
    (["slow", "--factor", "-2"], "--factor must be >= 1"),
    (["error", "--rate", "-1"], "--rate must be >= 0"),
    (["error", "--rate", "2"], "--rate is a probability for error and must be <= 1"),
    (["crash", "--duration", "0"], "--duration must be > 0"),
    (["ratelimit", "--retry-after", "-1"], "--retry-after must be >= 0"),
]


@pytest.mark.e2e
@pytest.mark.parametrize(("extra", "expected"), FAULT, ids=[" ".join(a) for a, _ in FAULT])
def test_fault_names_the_flag_the_instance_refuses(instance: str, extra: list[str], expected: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "fault", instance, *extra]) == 2
    assert _one_line(capsys) == f"error: {instance} refused the fault (HTTP 400): {expected}"


@pytest.mark.parametrize("value", ["70000", "-1", "http"])
def test_fleet_base_port_out_of_range_is_an_argparse_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["sim", "fleet", "--instances", "1", "--base-port", value])
    assert exit_.value.code == 2
    assert "argument --base-port: " in capsys.readouterr().err


def test_fleet_refuses_instances_past_the_last_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "fleet", "--instances", "3", "--base-port", "65534"]) == 2
    assert _one_line(capsys).startswith("error: --base-port 65534 leaves no port for instance 2")
