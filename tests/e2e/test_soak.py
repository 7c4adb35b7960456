"""The 2-minute soak (``python -m bench soak``): steady traffic through two workers while instances crash,
hang and drift, the store and Redis are killed and restarted and the spool's disk fills and frees;
then every count must reconcile."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")]
ROOT = Path(__file__).resolve().parents[2]
MINUTES, RPS = 2, 8


def test_two_minutes_of_everything_going_wrong_lose_nothing() -> None:
    run = subprocess.run([sys.executable, "-m", "bench", "soak", "--minutes", str(MINUTES), "--rps", str(RPS)],
                         cwd=ROOT, capture_output=True, text=True, timeout=MINUTES * 60 + 300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["answered"] == MINUTES * 60 * RPS, out  # every request answered (open loop: none skipped)
    assert set(out["statuses"]) == {"200"}, out["statuses"]  # faults cost a retry or a hedge, never the client
    assert out["client_timeouts"] == 0
    assert out["drained"] and out["lost"] == 0 and out["duplicates"] == 0, out
    assert out["traces"] == out["answered"]  # one trace per answered request
    verify = out["verify"]
    assert verify["mismatched"] == 0 and verify["reproduced"] == verify["n"] == out["traces"], verify
    assert len(out["events"]) >= 7, out["events"]  # the script ran: crash, hang, drift, store and Redis restarts
    # memory flat after warm-up: a few MB of caches and histograms settle, no leak of one object per request
    assert all(mb < 48 for mb in out["rss_growth_mb"].values()), out["rss_growth_mb"]
