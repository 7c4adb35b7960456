"""Every ``--port`` flag of ``store`` and ``serve`` refuses what is not a port (argparse, naming the flag).

The audit's defect: ``store --port 99999`` said ``store ready http://127.0.0.1:99999`` and listened elsewhere.
"""

from __future__ import annotations

import argparse
import errno

import pytest

from app.cli import main
from app.cli._common import bind_problem, port, port_or_zero


@pytest.mark.parametrize("argv", [["store", "--port"], ["serve", "--port"], ["serve", "--metrics-ports"]])
@pytest.mark.parametrize("value", ["99999", "0", "-1", "65536", "eighty"])
def test_a_port_flag_refuses_what_is_not_a_port(argv: list[str], value: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[1]}: " in err and "1-65535" in err, err


@pytest.mark.parametrize(("text", "expected"), [("1", 1), ("8080", 8080), ("65535", 65535)])
def test_port_admits_1_to_65535(text: str, expected: int) -> None:
    assert port(text) == expected
    assert port_or_zero(text) == expected


def test_port_or_zero_admits_zero_and_port_does_not() -> None:
    assert port_or_zero("0") == 0
    with pytest.raises(argparse.ArgumentTypeError):
        port("0")


def test_bind_problem_names_the_port_the_host_and_the_flag() -> None:
    in_use = OSError(errno.EADDRINUSE, "error while attempting to bind on address ('h', 1): address already in use")
    assert bind_problem(in_use, "127.0.0.1", 8080, "--port") == "port 8080 on 127.0.0.1 is in use (--port)"
    assert bind_problem(OSError(errno.EACCES, "Permission denied: 'traces.duckdb'"), "h", 1) is None  # not a bind
    assert bind_problem(OSError(errno.EACCES, "Permission denied"), "h", 80, binding=True) == (
        "port 80 on h needs privileges this process lacks (--port)")
