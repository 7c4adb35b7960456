"""``routelens sim fleet|fault|faults|traffic`` and ``drill`` argument errors, against a real fleet process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.cli import main
from app.run.procs import free_port, port_is_free

ROOT = Path(__file__).resolve().parents[3]
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "How are you doing today?"}]}).encode()
pytestmark = pytest.mark.e2e


def _block(count: int) -> int:
    for _ in range(50):
        base = free_port()
        if all(port_is_free("127.0.0.1", base + i) for i in range(count)):
            return base
    raise RuntimeError("no block of free ports")


def _chat(url: str) -> int:
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=BODY, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


@dataclass
class Fleet:
    base: int
    lines: list[str]
    log: Path

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.base + i}"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    log = tmp_path_factory.mktemp("fleet") / "faults.jsonl"
    base = _block(3)
    proc = subprocess.Popen([sys.executable, "-m", "app", "sim", "fleet", "--instances", "3", "--base-port",
                             str(base), "--zero-delay", "--fault-log", str(log)], cwd=ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline().strip() for _ in range(4)]
    try:
        assert lines[-1] == "fleet ready", lines
        yield Fleet(base, lines, log)
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def test_fleet_without_a_config_serves_instance_i_on_base_plus_i(fleet: Fleet) -> None:
    words = [line.split() for line in fleet.lines[:3]]
    assert [w[4] for w in words] == [fleet.url(i) for i in range(3)]
    assert [w[3] for w in words] == ["deepseek-v4-32k", "deepseek-coder-6b-fp16", "deepseek-coder-6b-int4"]
    for i in range(3):
        with urllib.request.urlopen(f"{fleet.url(i)}/v1/models", timeout=5) as resp:
            assert json.loads(resp.read())["data"][0]["id"] == words[i][3]


def test_fault_cli_injects_lists_and_clears(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    url = fleet.url(1)
    assert main(["sim", "fault", url, "error", "--rate", "1", "--duration", "60"]) == 0
    assert "started on coder-fp16-1, ends after 60 s" in capsys.readouterr().out
    assert _chat(url) == 500 and _chat(fleet.url(0)) == 200
    assert main(["sim", "faults", url]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [(f["kind"], f["requests_affected"]) for f in listing["active"]] == [("error", 1)]
    assert main(["sim", "faults", url, "--clear"]) == 0
    ended = json.loads(capsys.readouterr().out)["ended"]
    assert ended[0]["end_reason"] == "cleared" and _chat(url) == 200
    events = [json.loads(line) for line in fleet.log.read_text().splitlines()]
    assert [(e["event"], e["kind"], e["instance"]) for e in events][-2:] == [
        ("start", "error", "coder-fp16-1"), ("end", "error", "coder-fp16-1")]
    assert events[-1]["ended_at"] >= events[-1]["started_at"]


def test_crash_drops_requests_keeps_admin_and_comes_back_after_its_duration(fleet: Fleet) -> None:
    url = fleet.url(2)
    assert main(["sim", "fault", url, "crash", "--duration", "0.5", "--json"]) == 0
    with pytest.raises(OSError):  # dropped connections (urllib: RemoteDisconnected / reset)
        _chat(url)
    assert main(["sim", "faults", url]) == 0  # the admin API answers while crashed
    for _ in range(300):  # bounded polls until the crash's duration is over
        try:
            if _chat(url) == 200:
                break
        except OSError:
            time.sleep(0.02)
    assert _chat(url) == 200


def test_faults_clear_works_on_a_crashed_instance(fleet: Fleet) -> None:
    url = fleet.url(1)
    assert main(["sim", "fault", url, "crash"]) == 0
    with pytest.raises(OSError):
        _chat(url)
    assert main(["sim", "faults", url, "--clear"]) == 0
    for _ in range(300):
        try:
            if _chat(url) == 200:
                break
        except OSError:
            time.sleep(0.02)
    assert _chat(url) == 200


@pytest.mark.parametrize(("argv", "message"), [
    (["sim", "fault", "http://127.0.0.1:9", "meltdown"], "invalid choice"),
    (["sim", "fault", "{unreachable}", "slow"], "cannot reach"),
    (["sim", "fault", "{fleet}", "error", "--rate", "3"], "HTTP 400"),
])
def test_fault_cli_bad_input(fleet: Fleet, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    argv = [a.replace("{unreachable}", closed).replace("{fleet}", fleet.url(0)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse rejects the kind itself
        code = int(exc.code or 0)
    assert code == 2 and message in capsys.readouterr().err
    assert _chat(fleet.url(0)) == 200  # the fleet keeps serving


def test_traffic_cli_against_an_instance(fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "summary.json"
    argv = ["sim", "traffic", "--api", fleet.url(0), "--duration", "0.5", "--rps", "40", "--sessions", "0.3",
            "--seed", "3", "--json", str(out)]
    assert main(argv) == 0
    summary = json.loads(out.read_text())
    assert summary["requests"] > 0 and summary["errors"] == 0 and summary["accuracy"] is not None
    assert summary["feedback_accepted"] == 0  # an instance has no /v1/feedback; traffic goes on regardless
    assert "traffic:" in capsys.readouterr().out


def test_drill_with_a_malformed_scenario_names_file_line_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nduration_s: 10\nfaults:\n  - {at_s: 1, instance: 9, kind: crash}\n")
    assert main(["drill", "run", str(bad)]) == 2
    assert f"{bad}:4: faults[0].instance" in capsys.readouterr().err.replace("\n", "")
