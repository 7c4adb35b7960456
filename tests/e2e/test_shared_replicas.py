"""Two gateway processes sharing one Redis: one client bucket, breakers, spend and sessions for both; Redis down,
both keep routing on local state and share again once it is back."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.e2e.net import metrics
from tests.polling import wait_until
from tests.redis_server import REDIS_SERVER, RedisServer

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server not found (Debian package redis-server; make install)")]

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


def post(url: str, key: str, ticket: str | None = None) -> tuple[int, dict[str, str], Any]:
    """POST a chat request as client ``key`` (in session ``ticket``): status, headers (lower-case), JSON body."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    if ticket is not None:
        headers["x-ticket-id"] = ticket
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(CHAT).encode(), method="POST",
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, json.loads(exc.read())


def shared_of(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/v1/router/state", timeout=10) as resp:
        state: dict[str, Any] = json.loads(resp.read())["shared"]
    return state


def fallbacks(url: str) -> float:
    """Shared-state calls this replica answered from its own state (Redis down or late)."""
    return metrics(url).value("routelens_shared_fallbacks_total", backend="redis")


def until(cond: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


@dataclass
class Replicas:
    a: str
    b: str
    redis: RedisServer
    fleet: Proc


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    redis = RedisServer(tmp_path).start()
    instances = [{"id": i, "model": "m", "url": f"http://127.0.0.1:{free_port()}", "context_window": 32768}
                 for i in ("m-a", "m-b")]
    base = {
        "fleet": {"instances": instances},
        "storage": {"duckdb_path": str(tmp_path / "traces.duckdb"), "flush_interval_ms": 20},
        "scrape": {"interval_s": 0.5, "timeout_s": 0.5, "stale_after_s": 30},
        "sim": {"time_scale": 50, "seed": 1},
        "probes": {"enabled": False},
        "shared": {"backend": "redis", "url": redis.url, "key_prefix": "e2e:", "timeout_ms": 250},
        "throttles": {"client": {"rate": 0.01, "burst": 4}},
        "resilience": {"breakers": {"instance": {"consecutive_failures": 3, "open_s": 60}}},
        "economics": {"affinity": {"header": "x-ticket-id"},
                      "budgets": {"refresh_s": 0.2, "bands": [{"name": "all", "hours": [[0, 24]], "max_spend": 1e9}]}},
    }
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump(base))
    py = [sys.executable, "-m", "app"]
    ports = free_port(), free_port()
    procs = [Proc([*py, "sim", "fleet", "--config", str(cfg)])]
    try:
        procs[0].wait_for("fleet ready")
        for i, port in enumerate(ports):
            procs.append(Proc([*py, "serve", "--config", str(cfg), "--workers", "1", "--port", str(port),
                               "--db", str(tmp_path / f"traces-{i}.duckdb")]))
        for p in procs[1:]:
            p.wait_for("gateway ready")
        yield Replicas(f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", redis, procs[0])
    finally:
        for p in reversed(procs):
            p.stop()
        redis.stop()


def test_two_gateways_share_one_client_bucket_and_route_on_when_redis_is_down(replicas: Replicas) -> None:
    a, b = replicas.a, replicas.b
    healthy = {"backend": "redis", "healthy": True, "problem": None}
    # one Redis call over its timeout on a loaded machine marks a replica unhealthy until its watch reconnects
    # (at 50 ms, a full test run on two cores once let a fifth request through a local bucket): 250 ms, and
    # wait for both to be healthy, then check they share
    assert wait_until(lambda: shared_of(a) == healthy == shared_of(b), 30, 0.1), (shared_of(a), shared_of(b))
    # burst 4 for the client across both processes: 2 + 2 pass, then each refuses. A take whose refill is not
    # back within the 250 ms is decided by the replica's own bucket (the design's "Redis down" rule) and counted
    # as a fallback: a burst during which one happened is played again with a fresh key, at most three times;
    # a fifth request through with no fallback fails at once.
    for attempt in range(3):
        key, before = f"sk-one-{attempt}", fallbacks(a) + fallbacks(b)
        first = [post(url, key)[0] for url in (a, b, a, b)]
        refused = [post(url, key) for url in (a, b)]
        if fallbacks(a) + fallbacks(b) == before:
            break
    assert first == [200] * 4
    for status, headers, body in refused:
        assert status == 429 and int(headers["retry-after"]) >= 1
        assert body["error"]["code"] == "client_rate_limited"
    assert post(b, "sk-two")[0] == 200  # another key: its own bucket

    replicas.redis.stop()
    # both keep routing on local state (local buckets: full for a key they have not seen) and say so
    assert post(a, "sk-three")[0] == 200 and post(b, "sk-three")[0] == 200
    until(lambda: not shared_of(a)["healthy"] and not shared_of(b)["healthy"])
    assert shared_of(a)["problem"]

    replicas.redis.start()  # same port, empty: the buckets start full again
    until(lambda: shared_of(a)["healthy"] and shared_of(b)["healthy"])
    assert [post(url, "sk-four")[0] for url in (a, b, a, b, a)] == [200] * 4 + [429]  # shared again


def breaker_of(url: str, instance: str) -> str | None:
    with urllib.request.urlopen(url + "/v1/router/state", timeout=10) as resp:
        rows = json.loads(resp.read())["breakers"]["breakers"]
    return next((r["state"] for r in rows if r["scope"] == "instance" and r["name"] == instance), None)


def test_a_breaker_opened_by_one_gateway_is_seen_by_the_other(replicas: Replicas) -> None:
    a, b = replicas.a, replicas.b
    assert breaker_of(b, "m-a") in (None, "closed")
    replicas.fleet.stop()  # the one instance refuses connections: only a's attempts fail
    for i in range(6):
        post(a, f"sk-{i}")  # a fresh key each: the client bucket is not what refuses them
        if breaker_of(a, "m-a") not in (None, "closed"):
            break
    assert breaker_of(a, "m-a") not in (None, "closed")
    until(lambda: breaker_of(b, "m-a") not in (None, "closed"), timeout_s=10)  # through Redis pub/sub


def state_of(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/v1/router/state", timeout=10) as resp:
        state: dict[str, Any] = json.loads(resp.read())
    return state


def calls_of(url: str) -> float:
    """Calls counted in the budget band's window, as the gateway at ``url`` knows them (both replicas' adds)."""
    return float(next(row["calls"] for row in state_of(url)["budgets"] if row["band"] == "all"))


def metric(url: str, name: str) -> float | None:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return next((float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{")), None)


def test_spend_and_sessions_are_shared_by_the_two_gateways(replicas: Replicas) -> None:
    a, b = replicas.a, replicas.b
    until(lambda: metric(a, "routelens_shared_replicas") == 2 and metric(b, "routelens_shared_replicas") == 2)
    # spend: each gateway adds locally and flushes in the background; each reads the other's adds back
    for i, url in enumerate((a, a, a, b, b)):
        assert post(url, f"sk-spend-{i}")[0] == 200
    until(lambda: calls_of(a) == 5 and calls_of(b) == 5)
    # a session bound by a: written to Redis in the background, published, and followed by b
    status, headers, _ = post(a, "sk-session", ticket="T-1")
    assert status == 200
    bound = headers["x-routelens-instance"]
    store = redis.Redis.from_url(replicas.redis.url)
    try:
        until(lambda: store.get("e2e:bind:affinity:T-1") == bound.encode())
    finally:
        store.close()
    for i, url in enumerate((b, a, b)):
        status, headers, _ = post(url, f"sk-session-{i}", ticket="T-1")
        assert status == 200 and headers["x-routelens-instance"] == bound
    assert state_of(a)["shared"]["healthy"] and state_of(b)["shared"]["healthy"]
