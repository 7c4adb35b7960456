"""A hostile instance, as real processes: invalid UTF-8, then impossible gauges, then healthy again.

The fleet (``routelens sim fleet``) and the gateway (``routelens serve``) run as child processes;
faults are injected with ``routelens sim fault``. Throughout, the steady instance keeps being
scraped, the hostile one is out of the feasible set with the reason, and it comes back.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from app.run.procs import free_port
from schemas import DecisionTrace
from tests.e2e.conftest import ROOT, Proc
from tests.e2e.net import call, metrics
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
PY = [sys.executable, "-m", "app"]
BAD, STEADY = "bad", "steady"


@dataclass
class Pair:
    gateway: str
    urls: dict[str, str]
    gateway_proc: Proc


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    tmp = tmp_path_factory.mktemp("hostile")
    urls = {iid: f"http://127.0.0.1:{free_port()}" for iid in (BAD, STEADY)}
    port = free_port()
    cfg = {
        "fleet": {"instances": [{"id": iid, "model": "m", "url": url} for iid, url in urls.items()]},
        "gateway": {"port": port, "max_attempts": 2},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 20},
        # out after 3 s without a good scrape; bounds loose enough for a loaded 2-core machine
        "scrape": {"interval_s": 0.2, "timeout_s": 2.0, "suspect_after_s": 2.0, "stale_after_s": 3.0},
        "probes": {"enabled": False},
        "sim": {"time_scale": 20, "seed": 1},
    }
    path = tmp / "routelens.yaml"
    path.write_text(yaml.safe_dump(cfg))
    procs = [Proc([*PY, "sim", "fleet", "--config", str(path)])]
    try:
        procs[0].wait_for("fleet ready")
        procs.append(Proc([*PY, "serve", "--config", str(path), "--workers", "1"]))
        procs[1].wait_for("gateway ready")
        yield Pair(f"http://127.0.0.1:{port}", urls, procs[1])
    finally:
        for p in reversed(procs):
            p.stop()


def sim(*args: str) -> None:
    out = subprocess.run([*PY, "sim", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def state(pair: Pair) -> dict[str, dict[str, Any]]:
    status, body = call("GET", f"{pair.gateway}/v1/router/state")
    assert status == 200, body
    return {i["instance"]: i for i in body["instances"]}


def failures(pair: Pair, reason: str) -> float:
    return metrics(pair.gateway).value("routelens_scrape_failures_total", default=0.0, instance=BAD, reason=reason)


def routed(pair: Pair, n: int, tag: str) -> list[str]:
    served = []
    for i in range(n):
        status, body = call("POST", f"{pair.gateway}/v1/chat/completions",
                            {"model": "m", "messages": [{"role": "user", "content": f"hello {i}"}]},
                            headers={"X-Request-Id": f"{tag}-{i}"})
        assert status == 200, body
        served.append(state_of_answer(pair, f"{tag}-{i}").selected_instance or "")
    return served


def state_of_answer(pair: Pair, request_id: str) -> DecisionTrace:
    """The stored trace, read back through the gateway (polled: storage flushes in the background)."""
    def found() -> tuple[int, Any] | None:
        status, body = call("GET", f"{pair.gateway}/v1/traces/{request_id}")
        assert status in (200, 404), (status, body)  # never a 500, whatever the instance reported
        return (status, body) if status == 200 else None

    got = wait_until(found, 30, 0.05)
    assert got, f"trace {request_id} never stored"
    return DecisionTrace.model_validate(got[1])


def hostile_phase(pair: Pair, kind: str, reason: str) -> None:
    """Inject ``kind``; the bad instance goes out with ``reason`` while the steady one stays scraped."""
    before = state(pair)[STEADY]["scraped_at"]
    sim("fault", pair.urls[BAD], kind)
    def out_with_reason() -> bool:  # older than stale_after_s: the freshness filter takes it out
        s = state(pair)[BAD]
        return bool(s["stale"] and s["age_s"] > 3.5 and (s["scrape_error"] or "").startswith(reason))

    out = wait_until(out_with_reason, 30)
    assert out, state(pair)[BAD]
    now = state(pair)
    assert now[STEADY]["scraped_at"] > before and not now[STEADY]["stale"] and now[STEADY]["scrape_error"] is None
    status, body = call("GET", f"{pair.gateway}/health")
    assert (status, body["status"], body["storage"]["spool"]) == (200, "ok", "ok")  # one instance, not the loop
    assert failures(pair, reason) > 0
    assert set(routed(pair, 4, kind)) == {STEADY}
    trace = state_of_answer(pair, f"{kind}-0")
    bad = next(c for c in trace.candidates if c.instance == BAD)
    assert not bad.feasible and any(f"({reason}: " in v.reason for v in bad.violations), bad.violations
    sim("faults", pair.urls[BAD], "--clear")


def test_a_hostile_instance_is_contained_and_comes_back(pair: Pair) -> None:
    assert wait_until(lambda: all(s["scraped_at"] and not s["stale"] for s in state(pair).values()), 30)
    hostile_phase(pair, "invalid-utf8-metrics", "decode")
    hostile_phase(pair, "out-of-range-metrics", "out_of_range")
    back = wait_until(lambda: not (s := state(pair)[BAD])["stale"] and s["scrape_error"] is None and s, 30)
    assert back and back["queue"] is not None and back["queue"] >= 0

    def feasible_again() -> bool:  # back in the pool; whether it wins then depends on its gauges, not on the fault
        tag = f"back-{len(pair.gateway_proc.lines)}-{time.monotonic_ns()}"
        routed(pair, 1, tag)
        bad = next(c for c in state_of_answer(pair, f"{tag}-0").candidates if c.instance == BAD)
        return bad.feasible and not bad.violations and bad.rank is not None

    assert wait_until(feasible_again, 60)
    logged = [line.split(f"scrape of {BAD} ")[1] for line in pair.gateway_proc.lines if f"scrape of {BAD} " in line]
    # once per change of reason, not once per round (a recovery may or may not fall between the faults)
    failing = [m.split(":")[0] for m in logged if m.startswith("failing")]
    assert failing == ["failing (decode)", "failing (out_of_range)"], logged
    assert logged[-1] == "recovered (was failing: out_of_range)\n", logged
