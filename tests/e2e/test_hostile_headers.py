"""Real processes: header bytes that are not UTF-8, lines over 64 KiB and control characters, over a raw socket.

Each header the gateway hashes or reads (the experiment's session key, the affinity key, a client
throttle's key, a policy condition) once crashed the process (mmh3's segfault: with one worker, the
whole deployment), answered 500, or lost its trace. Each must now be an OpenAI-shaped 400 with its
trace stored, the process serving the next request, and nothing of the request in its log.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.e2e.net import call
from tests.polling import wait_until
from tests.raw_http import Answer, exchange, request

pytestmark = pytest.mark.e2e
BAD = b"\xffsecret\xfe"


@dataclass
class Served:
    port: int
    gateway: Proc


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("hostile-headers")
    inst, port = free_port(), free_port()
    policy = tmp / "policy.yaml"
    policy.write_text("routing_matrix:\n"
                      "  - {rule_name: slow, condition: \"header('x-throttle') == 'slow'\", primary_target: m}\n")
    cfg = tmp / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 20},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"enabled": False},
        "experiments": {"key": "session", "arms": [{"name": "one", "router_version": "v1", "share": 0.5},
                                                   {"name": "two", "router_version": "v2", "share": 0.5}]},
        "economics": {"affinity": {"header": "x-affinity"}},
        "throttles": {"client": {"rate": 1000, "burst": 1000, "key": ["header:x-tenant"]}},
        "routing": {"policy": str(policy)},
    }))
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    procs = [Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])]
    try:
        procs[0].wait_for("fleet ready")
        procs.append(Proc([*py, "serve", "--workers", "1"]))  # one worker: its crash was the deployment's
        procs[1].wait_for("gateway ready")
        yield Served(port, procs[1])
    finally:
        for p in reversed(procs):
            p.stop()


def alive_and_serving(served: Served) -> None:
    assert served.gateway.proc.poll() is None, "".join(served.gateway.lines[-40:])
    answer = exchange(served.port, request([(b"x-session-id", b"s-1"), (b"x-tenant", b"acme")]))
    assert answer.status == 200, answer


def error_of(answer: Answer, code: str) -> dict[str, Any]:
    assert answer.status == 400 and answer.headers["content-type"].startswith("application/json"), answer
    error: dict[str, Any] = answer.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", code) and error["message"], error
    return error


@pytest.mark.parametrize("header", ["x-session-id", "x-affinity", "x-tenant", "x-throttle"])
def test_a_header_that_is_not_utf8_is_a_traced_400_and_the_process_lives_on(served: Served, header: str) -> None:
    answer = exchange(served.port, request([(header.encode(), BAD)]))
    error = error_of(answer, "invalid_header")
    assert error["param"] == header and b"secret" not in answer.body
    alive_and_serving(served)

    def stored() -> dict[str, Any] | None:
        status, body = call("GET", f"http://127.0.0.1:{served.port}/v1/traces/{answer.headers['x-request-id']}")
        return body if status == 200 else None

    trace = wait_until(stored, timeout_s=30)
    assert trace is not None and trace["outcome"]["error_class"] == "invalid_header"


def test_requests_aiohttp_cannot_parse_are_json_and_the_log_holds_none_of_their_bytes(served: Served) -> None:
    canary = b"CANARY" * 11_000  # a 66 KB bearer token: over the 64 KiB line limit
    for raw in (request([(b"Authorization", b"Bearer " + canary)]),
                request([(b"X-Request-Id", b"abc\x01\x7fdef")])):
        answer = exchange(served.port, raw)
        assert error_of(answer, "invalid_http")["param"] is None
        assert b"CANARY" not in answer.body and b"abc" not in answer.body
        alive_and_serving(served)
    log = "".join(served.gateway.lines)
    assert "CANARY" not in log and "Traceback" not in log, log[-3000:]


def test_a_compressed_body_is_refused_unread_and_the_gateway_keeps_serving(served: Served) -> None:
    """The API audit's bomb: 1 MB of gzip inflating to 256 MiB was inflated on the event loop (1-4 s with no request
    served, /health 503 'scrape loop stalled') before the 413. Bodies are now read as sent: a coded one is a 415."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip
    zeros = b"\0" * (1 << 24)
    bomb = b"".join([*(packer.compress(zeros) for _ in range(16)), packer.flush()])
    head = request([(b"Content-Encoding", b"gzip")], body=b"").replace(
        b"Content-Length: 0", b"Content-Length: " + str(len(bomb)).encode())
    answer = exchange(served.port, head + bomb)
    assert answer.status == 415, answer
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_content_encoding", "Content-Encoding"), error
    status, health = call("GET", f"http://127.0.0.1:{served.port}/health")
    assert status == 200, health
    alive_and_serving(served)
    assert wait_until(lambda: call("GET", f"http://127.0.0.1:{served.port}/v1/traces/"
                                          f"{answer.headers['x-request-id']}")[0] == 200, timeout_s=30)
