"""``routelens probes run`` on its own, and a gateway following it with ``probes.follow_url``.

Real processes: a simulated fleet of two instances, the standalone prober (it owns the trace file)
and a gateway that does not probe but takes the prober's verdicts. The ``garbage`` fault on one
instance fails its syntax probe with a reason naming what was wrong, and the gateway stops
routing to it. The gateway's ``/metrics`` republishes the prober's series (the shipped Prometheus
job scrapes the gateway alone), those of its last answer while it hangs (``kill -STOP``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.e2e.net import call, metrics
from tests.polling import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, dict[str, str], Proc]]:
    tmp: Path = tmp_path_factory.mktemp("prober")
    urls = {f"s-{i}": f"http://127.0.0.1:{free_port()}" for i in range(2)}
    prober_port, gw_port = free_port(), free_port()
    base = {
        "scrape": {"interval_s": 0.2, "timeout_s": 0.5, "stale_after_s": 30},
        "sim": {"time_scale": 50, "seed": 2},
        "fleet": {"instances": [{"id": i, "model": "chat-m", "url": u} for i, u in urls.items()]},
    }
    prober_cfg, gw_cfg = tmp / "prober.yaml", tmp / "gateway.yaml"
    prober_cfg.write_text(yaml.safe_dump({**base, "storage": {"duckdb_path": str(tmp / "probes.duckdb")},
                                          "probes": {"interval_s": 0.5, "kinds": ["syntax"],
                                                     "hysteresis": {"fail_k": 2, "fail_n": 3, "recover_m": 2}}}))
    gw_cfg.write_text(yaml.safe_dump({**base, "gateway": {"port": gw_port},
                                      "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 20},
                                      "probes": {"enabled": False, "follow_url": f"http://127.0.0.1:{prober_port}"}}))
    py = [sys.executable, "-m", "app"]
    procs = [Proc([*py, "--config", str(prober_cfg), "sim", "fleet"])]
    try:
        procs[0].wait_for("fleet ready")
        # The gateway binds first: the prober's probe connections take ephemeral ports, and the ports
        # picked above are ephemeral ones too. The gateway follows the prober once it answers.
        procs.append(Proc([*py, "--config", str(gw_cfg), "serve", "--workers", "1"]))
        procs[-1].wait_for("gateway ready")
        procs.append(Proc([*py, "--config", str(prober_cfg), "probes", "run", "--port", str(prober_port)]))
        procs[-1].wait_for("prober ready")
        yield f"http://127.0.0.1:{prober_port}", f"http://127.0.0.1:{gw_port}", urls, procs[-1]
    finally:
        for p in reversed(procs):
            p.stop()


def gateway_verdict(gateway: str, instance: str) -> str | None:
    _, state = call("GET", f"{gateway}/v1/router/state")
    snap = next(s for s in state["instances"] if s["instance"] == instance)
    return next((p["verdict"] for p in snap["probes"] if p["kind"] == "syntax"), None)


def test_garbage_fails_the_syntax_probe_and_the_following_gateway_routes_around_it(
        stack: tuple[str, str, dict[str, str], Proc]) -> None:
    prober, gateway, urls, _ = stack
    assert wait_until(lambda: all(gateway_verdict(gateway, i) == "ok" for i in urls), 30)
    status, health = call("GET", f"{prober}/health")
    assert status == 200 and health["status"] == "ok"
    assert call("POST", f"{urls['s-1']}/admin/faults", {"kind": "garbage", "rate": 1.0})[0] == 201

    assert wait_until(lambda: gateway_verdict(gateway, "s-1") == "failed", 30)
    _, feed = call("GET", f"{prober}/v1/probes/verdicts")
    (syntax,) = [s for s in feed["verdicts"]["s-1"] if s["kind"] == "syntax"]
    assert syntax["verdict"] == "failed" and syntax["reason"]  # what was wrong, in words
    _, state = call("GET", f"{gateway}/v1/router/state")
    assert state["probes"]["source"] == f"follow:{prober}" and state["probes"]["problem"] is None
    for n in range(10):
        status, body = call("POST", f"{gateway}/v1/chat/completions",
                            {"model": "auto", "messages": [{"role": "user", "content": f"hi {n}"}], "max_tokens": 4})
        assert status == 200 and body["choices"][0]["message"]["content"]
    def served_by() -> list[str]:
        items = call("GET", f"{gateway}/v1/traces?limit=50")[1]["items"]
        return [i["selected_instance"] for i in items if i["http_status"] == 200]

    served = wait_until(served_by, 10)
    assert set(served) == {"s-0"}, served

    assert call("DELETE", f"{urls['s-1']}/admin/faults")[0] == 200
    assert wait_until(lambda: gateway_verdict(gateway, "s-1") == "ok", 30)


def verdict_series(url: str) -> dict[frozenset[tuple[str, str]], float]:
    """``routelens_probe_verdict`` of one scrape of ``url``/metrics, by label set."""
    return {labels: v for (name, labels), v in metrics(url).items() if name == "routelens_probe_verdict"}


def test_the_gateway_republishes_the_followed_prober_s_series_and_keeps_them_while_it_hangs(
        stack: tuple[str, str, dict[str, str], Proc]) -> None:
    prober, gateway, urls, prober_proc = stack

    def problem() -> str:
        return str(call("GET", f"{gateway}/v1/router/state")[1]["probes"]["problem"] or "")

    # the prober's own verdict series, each instance's: the gateway had none of them
    assert wait_until(lambda: {dict(k)["instance"] for k in verdict_series(prober)} == set(urls), 30)
    assert wait_until(lambda: verdict_series(gateway) == verdict_series(prober), 10)
    m = metrics(gateway)
    assert not [labels for name, labels in m if name.startswith("routelens_probe_") and ("worker", "0") in labels]
    before = {k: v for (n, k), v in m.items() if n.startswith("routelens_probe_")}

    os.kill(prober_proc.proc.pid, signal.SIGSTOP)  # it hangs: connections taken, nothing answered
    try:
        said = wait_until(lambda: "unavailable" in (p := problem()) and p, 15)
        assert said.endswith("(TimeoutError: no answer within 1 s)"), said  # it had read '(TimeoutError: )'
        for _ in range(3):  # the series of its last answer stay, scrape after scrape (they had gone within 20 s)
            after = metrics(gateway)
            assert {k: v for (n, k), v in after.items() if n.startswith("routelens_probe_")} == before
            time.sleep(1.0)
    finally:
        os.kill(prober_proc.proc.pid, signal.SIGCONT)
    assert wait_until(lambda: problem() == "", 15)
