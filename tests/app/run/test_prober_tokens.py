"""The standalone prober's routes behind their tokens, served in-process on 127.0.0.1.

Relaying to a store (``--store-url``), its verdicts, alerts and stats were open whatever the
configuration said; owning the store, its ``POST /v1/traces`` took no intake token. Either made
"tokens set: allowed off loopback" untrue.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from app.run.probe_service import build_probe_app
from schemas.config import RouteLensConfig

CONFIG = {
    "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]},
    "probes": {"kinds": ["syntax"], "interval_s": 3600},
    "storage": {"read_token_env": "RL_T_READ", "intake_token_env": "RL_T_INTAKE"},
}


async def statuses(app: web.Application, calls: list[tuple[str, str, str | None]]) -> list[int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    out = []
    try:
        async with aiohttp.ClientSession() as session:
            for method, path, token in calls:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with session.request(method, f"http://127.0.0.1:{port}{path}", headers=headers,
                                           data=b"" if method == "POST" else None) as resp:
                    out.append(resp.status)
    finally:
        await runner.cleanup()
    return out


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RouteLensConfig:
    monkeypatch.setenv("RL_T_READ", "r")
    monkeypatch.setenv("RL_T_INTAKE", "i")
    monkeypatch.delenv("ROUTELENS_RELAY_TOKEN", raising=False)
    return RouteLensConfig.model_validate(CONFIG | {"storage": CONFIG["storage"]
                                                    | {"duckdb_path": str(tmp_path / "t.duckdb")}})


def test_relaying_to_a_store_its_routes_take_the_read_token(config: RouteLensConfig) -> None:
    app = build_probe_app(config, store_url="http://127.0.0.1:9")
    paths = ("/v1/probes/verdicts", "/v1/alerts", "/v1/probes/stats")
    calls = [("GET", p, token) for p in paths for token in (None, "wrong", "r")]
    assert asyncio.run(statuses(app, calls)) == [401, 401, 200] * 3


def test_owning_the_store_its_intake_takes_the_intake_token(config: RouteLensConfig) -> None:
    app = build_probe_app(config)
    calls = [("POST", "/v1/traces", None), ("POST", "/v1/traces", "r"), ("GET", "/v1/probes/verdicts", None)]
    assert asyncio.run(statuses(app, calls)) == [401, 401, 401]
    (ok,) = asyncio.run(statuses(build_probe_app(config), [("POST", "/v1/traces", "i")]))
    assert ok == 400  # an empty body: refused for what it holds, not for who sent it
