"""``/v1/models``' ``created`` is when ``serve`` started, the same whichever worker answers.

Found by an audit of the HTTP API: with ``serve --workers 2`` each worker said when it had itself
started (three seconds apart), so a client listing the models twice saw two ``created`` for one
model. The serve that starts the workers hands them its start time (``STARTED_AT_ENV``); a gateway
built without it keeps its own.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from app.run.gateway_app import STARTED_AT_ENV, build_gateway_app
from tests.app.run.test_storage_health import config, serving


async def _created(tmp_path: Path) -> set[int]:
    app = build_gateway_app(config(tmp_path, tmp_path / "spool"), str(tmp_path / "t.duckdb"))
    async with serving(app) as gateway:
        resp = await gateway.get("/v1/models")
        assert resp.status == 200
        return {card["created"] for card in (await resp.json())["data"]}


def test_a_worker_says_serves_start_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STARTED_AT_ENV, "1796642402")
    assert asyncio.run(_created(tmp_path)) == {1796642402}


def test_a_gateway_on_its_own_says_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STARTED_AT_ENV, raising=False)
    before = int(time.time())
    (created,) = asyncio.run(_created(tmp_path))
    assert before <= created <= int(time.time())
