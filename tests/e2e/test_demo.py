"""`routelens demo`: everything starts, one example request can be looked up, Ctrl-C stops it all."""

from __future__ import annotations

import json
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT
from tests.e2e.demo_run import start_demo
from tests.e2e.net import call, ok, stored_policy
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _listening(url: str) -> bool:
    host, port = re.match(r"http://([\d.]+):(\d+)", url).groups()  # type: ignore[union-attr]
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) == 0


def test_demo_serves_a_traceable_request_and_stops_cleanly(tmp_path: Path) -> None:
    run = start_demo(tmp_path)
    demo = run.proc
    try:
        out = run.output
        urls = set(re.findall(r"http://127\.0\.0\.1:\d+", out))
        gateway, app = run.gateway, run.app
        assert app is not None and {gateway, app} <= urls
        assert run.request_id, out
        request_id = run.request_id

        status, trace = call("GET", f"{gateway}/v1/traces/{request_id}")
        assert status == 200 and trace["request_id"] == request_id, trace
        # the policy it was decided with is stored under the hash it carries
        policy = wait_until(lambda: stored_policy(gateway, trace["policy_hash"]), timeout_s=30)  # a moment after
        assert policy is not None and policy["policy_hash"] == trace["policy_hash"], policy
        assert json.loads(policy["document"])["rules"]["source"] == "seed000.yaml"
        assert ok(f"{app}/_stcore/health")
        # The command the demo prints works as typed, from the folder `make demo` runs in.
        typed = re.search(rf"^ {{4}}(\S.* trace {re.escape(request_id)} --api {re.escape(gateway)})$", out, re.M)
        assert typed, out
        shown = subprocess.run(shlex.split(typed.group(1)), cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0 and request_id in shown.stdout, shown.stderr

        demo.proc.send_signal(signal.SIGINT)
        assert demo.proc.wait(60) == 0
    finally:
        demo.stop()
    output = "".join(demo.lines)
    assert "demo stopped" in output
    assert not any(_listening(u) for u in urls), "a child process outlived the demo"
    # It ended by re-deciding its last decisions under their own stored policy: every one the same.
    said = re.search(r"^replay --verify .*: (\d+) decisions re-decided under their own policy: (\d+) reproduced, "
                     r"(\d+) different", output, re.M)
    assert said, output
    n, reproduced, different = map(int, said.groups())
    assert n > 0 and reproduced > 0 and different == 0, said.group(0)
    again = re.search(r"^  the whole run: (\S.* replay --verify .*)$", output, re.M)
    assert again, output
    redone = subprocess.run([*shlex.split(again.group(1)), "--json"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert redone.returncode == 0, redone.stdout + redone.stderr
    whole = json.loads(redone.stdout.splitlines()[-1])
    assert whole["mismatched"] == 0 and whole["reproduced"] >= reproduced, whole
    # The trace is in the file, which nothing locks any more.
    db = str(tmp_path / "traces.duckdb")
    offline = subprocess.run([sys.executable, "-m", "app", "trace", request_id, "--db", db],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert offline.returncode == 0, offline.stderr
