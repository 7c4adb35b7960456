"""The HTTP API fuzzed from its own OpenAPI description: a live gateway (the store's routes mounted) and a live store.

schemathesis reads ``GET /openapi.json`` from each running server and sends a bounded number of
generated requests per operation, valid and invalid. Every answer must be no 5xx (a 502/503 only
where the description names it: no instance could answer), have a documented status, content type
and schema; neither server may log a traceback; and no chat request the gateway refused (4xx) may
have reached the simulated instance.
"""

from __future__ import annotations

import re
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.run.procs import free_port
from tests.e2e.conftest import Proc

pytestmark = pytest.mark.e2e
EXAMPLES = 15  # per operation and mode (valid, invalid)
_ATTEMPTS = re.compile(r'^routelens_gateway_attempts_total\{[^}]*\} (\S+)$', re.M)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    inst, port, store_port = free_port(), free_port(), free_port()
    cfg = tmp / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp / "traces.duckdb")},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"enabled": False},
    }))
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    fleet = Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])
    procs = [fleet]
    try:
        fleet.wait_for("fleet ready")
        gateway = Proc([*py, "serve", "--workers", "1"])
        procs.append(gateway)
        gateway.wait_for("gateway ready")
        store = Proc([*py, "store", "--port", str(store_port), "--db", str(tmp / "store.duckdb")])
        procs.append(store)
        store.wait_for("store ready")
        yield {"gateway": f"http://127.0.0.1:{port}", "store": f"http://127.0.0.1:{store_port}",
               "procs": {"gateway": gateway, "store": store}, "chat": []}
    finally:
        for p in reversed(procs):
            p.stop()


CHECKS = [response_schema_conformance, content_type_conformance, status_code_conformance]
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def _call(case: Any, servers: dict[str, Any]) -> None:
    response = case.call(timeout=30)
    case.validate_response(response, checks=CHECKS)
    allowed = set(case.operation.definition.raw.get("responses", {}))
    assert response.status_code < 500 or str(response.status_code) in allowed, (
        response.status_code, response.text[:300])
    if case.path == "/v1/chat/completions":
        servers["chat"].append(response.status_code)


def _fuzz(url: str, servers: dict[str, Any]) -> list[str]:
    """Every operation of the description at ``url``, EXAMPLES valid and EXAMPLES invalid requests each."""
    schema = schemathesis.openapi.from_url(url)
    failures = []
    for found in schema.get_all_operations():
        op = found.ok()
        for mode in MODES:
            @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                _call(case, servers)

            try:
                run()
            except Unsatisfiable:  # nothing to make invalid (no parameters, no body)
                continue
            except Exception as exc:  # noqa: BLE001  (every operation is tried; all failures are reported)
                failures.append(f"{op.method.upper()} {op.path} ({mode.value}): {type(exc).__name__}: {exc}"[:1500])
    return failures


def test_the_gateway_answers_every_generated_request_as_described(servers: dict[str, Any]) -> None:
    failures = _fuzz(f"{servers['gateway']}/openapi.json", servers)
    assert not failures, "\n\n".join(failures)


def test_the_store_answers_every_generated_request_as_described(servers: dict[str, Any]) -> None:
    failures = _fuzz(f"{servers['store']}/openapi.json", servers)
    assert not failures, "\n\n".join(failures)


def test_no_traceback_and_no_refused_request_reached_an_instance(servers: dict[str, Any]) -> None:
    statuses: list[int] = servers["chat"]
    assert statuses, "the fuzzing tests did not run before this one"
    with urllib.request.urlopen(f"{servers['gateway']}/metrics", timeout=10) as resp:
        attempts = sum(float(v) for v in _ATTEMPTS.findall(resp.read().decode()))
    passed = sum(1 for s in statuses if s < 400 or s >= 500)  # answered, or failed upstream: it was sent on
    assert 0 < attempts <= passed, (attempts, passed, sorted(set(statuses)))
    for name, proc in servers["procs"].items():
        assert not any("Traceback" in line for line in proc.lines), (name, "".join(proc.lines)[-3000:])
