"""``GET /v1/probes/stats?reset=`` given twice is a 400 naming it, as the store's routes answer, on 127.0.0.1.

Before, ``?reset=1&reset=0`` reset the counts (the first value, silently).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from app.run.probe_service import build_probe_app
from schemas.config import RouteLensConfig
from tests.serve_thread import on_loop

CONFIG = {
    "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]},
    "probes": {"kinds": ["syntax"], "interval_s": 3600},
}


async def answers(app: web.Application, paths: list[str]) -> list[tuple[int, Any]]:
    out = []
    async with on_loop(app) as base, aiohttp.ClientSession() as session:
        for path in paths:
            async with session.get(f"{base}{path}") as resp:
                out.append((resp.status, await resp.json()))
    return out


def test_reset_given_twice_is_a_400_naming_it(tmp_path: Path) -> None:
    config = RouteLensConfig.model_validate(CONFIG | {"storage": {"duckdb_path": str(tmp_path / "t.duckdb")}})
    app = build_probe_app(config, store_url="http://127.0.0.1:9")
    twice, once = asyncio.run(answers(app, ["/v1/probes/stats?reset=1&reset=0", "/v1/probes/stats?reset=1"]))
    assert twice == (400, {"error": {"message": "parameter `reset` is given twice", "type": "invalid_request_error",
                                     "param": "reset", "code": "invalid_parameter"}})
    assert once[0] == 200 and isinstance(once[1], dict)
