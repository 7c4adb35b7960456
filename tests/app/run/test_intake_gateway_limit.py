"""The gateway's ``POST /v1/traces`` takes bodies up to ``storage.intake_max_bytes``, as the store does.

Found by an audit of losing nothing: the gateway's application limit (32 MiB, its chat route's)
bounded the intake it forwards to a store process, whose own limit is ``storage.intake_max_bytes``
(64 MiB by default): a 40 MiB batch the store takes was refused by the gateway in front of it.
Here the gateway and the store are the applications ``routelens serve`` and ``routelens store``
build, on 127.0.0.1. The body is two traces in a JSON array padded with whitespace to 33 MiB (a
few hundred MiB of memory at most, with every copy).
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from app.run.gateway_app import build_gateway_app
from app.run.store import build_store_app
from bench.synthetic import TraceFactory
from schemas.config import RouteLensConfig
from tests.app.run.test_storage_health import config, elsewhere, serving

_MIB = 1 << 20


@pytest.fixture
def factory() -> TraceFactory:
    return TraceFactory(seed=5, n_candidates=2)


@pytest.fixture(autouse=True)
def no_relay_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROUTELENS_RELAY_TOKEN", raising=False)


def padded(factory: TraceFactory, size: int) -> tuple[bytes, list[str]]:
    traces = [factory.trace() for _ in range(2)]
    head = b"[" + traces[0].model_dump_json().encode() + b","
    tail = traces[1].model_dump_json().encode() + b"]"
    return head + b" " * (size - len(head) - len(tail)) + tail, [t.request_id for t in traces]


def limited(tmp_path: Path, name: str, max_bytes: int | None = None) -> RouteLensConfig:
    cfg = config(tmp_path / name, tmp_path / name / "spool")
    if max_bytes is None:
        return cfg
    return cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"intake_max_bytes": max_bytes})})


async def post(app: web.Application, body: bytes) -> tuple[int, dict[str, object]]:
    async with serving(app) as client:
        resp = await client.post("/v1/traces", data=io.BytesIO(body))
        return resp.status, orjson.loads(await resp.read())


def test_a_body_over_32_mib_reaches_the_store_through_the_gateway(tmp_path: Path, factory: TraceFactory) -> None:
    body, ids = padded(factory, 33 * _MIB)
    assert 32 * _MIB < len(body) < limited(tmp_path, "x").storage.intake_max_bytes
    with elsewhere(build_store_app(limited(tmp_path, "store"), str(tmp_path / "t.duckdb"))) as url:
        gateway = build_gateway_app(limited(tmp_path, "gw"), str(tmp_path / "t.duckdb"), store_url=url)
        status, out = asyncio.run(post(gateway, body))
    assert status == 200, out
    assert out["accepted"] == 2 and [a["request_id"] for a in out["results"]["accepted"]] == ids  # type: ignore[index]


def test_the_gateway_with_the_store_in_process_takes_it_too(tmp_path: Path, factory: TraceFactory) -> None:
    body, _ = padded(factory, 33 * _MIB)
    status, out = asyncio.run(post(build_gateway_app(limited(tmp_path, "gw"), str(tmp_path / "t.duckdb")), body))
    assert status == 200 and out["accepted"] == 2, out


def test_the_gateway_refuses_what_the_configured_limit_refuses(tmp_path: Path, factory: TraceFactory) -> None:
    body, _ = padded(factory, 2 * _MIB)
    with elsewhere(build_store_app(limited(tmp_path, "store", _MIB), str(tmp_path / "t.duckdb"))) as url:
        gateway = build_gateway_app(limited(tmp_path, "gw", _MIB), str(tmp_path / "t.duckdb"), store_url=url)
        status, out = asyncio.run(post(gateway, body))
    assert status == 413 and out["error"]["code"] == "request_too_large", out  # type: ignore[index]
