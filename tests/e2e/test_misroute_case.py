"""A misroute found on "Why this model" becomes a regression case, through a running gateway.

A real fleet and gateway (a copy of the shipped seed 000 policy), one request through the official
``openai`` client, its trace opened in the app (AppTest) reading the gateway: the operator says it
should have gone to the 32k model, previews the case (the page says the current policy fails it),
writes it. The file then holds the case, ``routelens policy test`` fails on it, and the gateway has
the feedback (a second verdict for the request is its 409).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from app.run.procs import free_ports
from app.ui import ENTRYPOINT
from sim.behaviour import builtin_config
from tests.e2e.fleet_and_gateway import fleet_and_gateway

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
QUERY = "What does a credit score measure?"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    tmp = tmp_path_factory.mktemp("misroute")
    policy = Path(shutil.copy(ROOT / "policies" / "seed000.yaml", tmp / "policy.yaml"))
    *ports, gw = free_ports(5)
    base = builtin_config(4, 0, zero_delay=True)
    instances = [s.model_copy(update={"url": f"http://127.0.0.1:{p}", "kv_cache_bytes": 48 << 30})  # the policy's
                 for s, p in zip(base.fleet.instances, ports, strict=True)]                      # min_gpu_mem reads it
    cfg = base.model_dump(mode="json")
    cfg.update({
        "fleet": {"instances": [s.model_dump(mode="json") for s in instances]},
        "gateway": {"host": "127.0.0.1", "port": gw},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 20},
        "routing": {"policy": str(policy)},
        "probes": {"enabled": False},
    })
    with fleet_and_gateway(cfg, tmp) as gateway:
        yield gateway, tmp / "c.yaml", policy


def _trace_stored(gateway: str, request_id: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(f"{gateway}/v1/traces/{request_id}", timeout=5) as found:
                found.read()
            return
        except urllib.error.HTTPError as exc:
            exc.close()
            assert time.monotonic() < deadline, "the trace was never stored"
            time.sleep(0.2)


def test_a_misroute_becomes_a_failing_policy_case_and_feedback(
        stack: tuple[str, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from openai import OpenAI

    gateway, config, policy = stack
    with OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": QUERY}], max_tokens=8)
    request_id = raw.headers["x-request-id"]
    _trace_stored(gateway, request_id)

    monkeypatch.delenv("ROUTELENS_DB", raising=False)
    monkeypatch.setenv("ROUTELENS_API_URL", gateway)
    monkeypatch.setenv("ROUTELENS_CONFIG", str(config))
    at = AppTest.from_file(str(ENTRYPOINT), default_timeout=30)
    at.run()
    at.query_params["request_id"] = request_id
    at.switch_page("views/trace_explorer.py").run()
    assert not at.exception, [e.value for e in at.exception]
    at.selectbox(key="mis_model").set_value("deepseek-v4-32k").run()
    at.text_input(key="mis_query").set_value("another question").run()
    assert any("does not hash to this request's query hash" in w.value for w in at.warning)
    at.text_input(key="mis_query").set_value(QUERY).run()  # hashes to the trace's query: used as the prompt
    assert all("does not hash" not in w.value for w in at.warning)
    # the rule offered is the one whose target is the model named
    assert at.selectbox(key="mis_rule:deepseek-v4-32k").value == "long_context_priority"
    assert any("The current policy fails: it matches rule - (target -)" in t.value for t in at.text)
    diff = next(c.value for c in at.code if c.language == "diff")
    assert f"+  - name: {request_id} should go to deepseek-v4-32k" in diff and policy.read_text().count(request_id) == 0

    at.button(key="mis_write").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("feedback recorded (HTTP 202)" in s.value for s in at.success), [s.value for s in at.success]
    case = yaml.safe_load(policy.read_text())["tests"][-1]
    assert case["expect"] == {"rule": "long_context_priority", "target": "deepseek-v4-32k"}
    assert case["request"]["prompt"] == QUERY  # typed by the operator into their own file, checked by hash

    run = subprocess.run([sys.executable, "-m", "app", "--config", str(config), "policy", "test", str(policy),
                          "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run.returncode == 1, run.stdout + run.stderr
    assert [f["name"] for f in json.loads(run.stdout.splitlines()[-1])["failed"]] == [case["name"]]

    again = urllib.request.Request(f"{gateway}/v1/feedback", method="POST",
                                   headers={"Content-Type": "application/json"},
                                   data=json.dumps({"request_id": request_id, "correct": False}).encode())
    with pytest.raises(urllib.error.HTTPError) as conflict:
        urllib.request.urlopen(again, timeout=5)
    conflict.value.close()
    assert conflict.value.code == 409
