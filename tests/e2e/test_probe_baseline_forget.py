"""``routelens probes baselines --forget``: a running prober (another process) learns the baseline again.

Real processes: a simulated instance, the standalone prober probing its latency, and the command
run as an operator runs it, while the prober goes on.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.run.procs import free_port
from probes.baselines import BaselineStore
from tests.e2e.conftest import ROOT, Proc
from tests.e2e.net import call
from tests.polling import wait_until

pytestmark = pytest.mark.e2e


def latency_reason(prober: str) -> str | None:
    _, feed = call("GET", f"{prober}/v1/probes/verdicts")
    found = [s for s in feed["verdicts"].get("s-0", []) if s["kind"] == "latency"]
    return found[0]["reason"] if found else None


def test_a_forgotten_baseline_is_learned_again_by_the_running_prober(tmp_path: Path) -> None:
    url, prober_port = f"http://127.0.0.1:{free_port()}", free_port()
    cfg = tmp_path / "prober.yaml"
    cfg.write_text(yaml.safe_dump({
        "sim": {"time_scale": 50, "seed": 2},
        "fleet": {"instances": [{"id": "s-0", "model": "chat-m", "url": url}]},
        "storage": {"duckdb_path": str(tmp_path / "probes.duckdb")},
        "probes": {"interval_s": 0.3, "kinds": ["latency"], "latency": {"baseline_probes": 8, "window": 3}},
    }))
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    procs = [Proc([*py, "sim", "fleet"])]
    try:
        procs[0].wait_for("fleet ready")
        procs.append(Proc([*py, "probes", "run", "--port", str(prober_port)]))
        procs[-1].wait_for("prober ready")
        prober = f"http://127.0.0.1:{prober_port}"
        baselines = tmp_path / "probes.duckdb.probe-baselines.json"
        assert wait_until(lambda: BaselineStore(baselines).get("s-0") is not None, 30)
        learned = BaselineStore(baselines).get("s-0")
        assert wait_until(lambda: latency_reason(prober) is not None
                          and not latency_reason(prober).startswith("learning"), 30)  # type: ignore[union-attr]

        listed = subprocess.run([*py, "probes", "baselines"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and "s-0" in listed.stdout, listed.stderr
        done = subprocess.run([*py, "probes", "baselines", "--forget", "s-0"], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        # the verdict's reason names the learning: its own, or, while hysteresis holds a degraded verdict,
        # "degraded held (...); the latest probe ok: learning baseline (n/8)"
        assert wait_until(lambda: "learning baseline" in (latency_reason(prober) or ""), 30)
        assert wait_until(lambda: (b := BaselineStore(baselines).get("s-0")) is not None and b != learned, 30)
        assert "latency baseline of s-0 dropped" in "".join(procs[-1].lines)
    finally:
        for p in reversed(procs):
            p.stop()
