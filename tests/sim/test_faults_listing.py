"""``GET /admin/faults`` and ``routelens sim faults``: an active fault is listed once, under ``active``.

Before, ``history`` was every fault ever started, so a fault still in force was listed twice, once
under ``active`` and once under ``history`` with ``ended_at: null``. Now ``history`` holds the faults
that ended (expired, cleared), and a fault moves there when it ends.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import ClientSession

from app.cli import main
from schemas.config.sim import SimModelProfile, SimSettings
from schemas.fleet import InstanceSpec
from sim.clock import VirtualClock
from sim.server import build_instance_app
from tests.sim.conftest import Serve


def _ids(records: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in records]


def test_active_faults_are_listed_once_and_history_holds_the_ended(
        spec: InstanceSpec, serve: Serve, capsys: pytest.CaptureFixture[str]) -> None:
    clock = VirtualClock()

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], int]:
        app = build_instance_app(spec, SimModelProfile(), SimSettings(zero_delay=True, seed=1), clock=clock)
        async with serve(app) as url, ClientSession() as http:

            async def call(method: str, path: str = "", body: Any = None) -> Any:
                async with http.request(method, f"{url}/admin/faults{path}", json=body) as resp:
                    return await resp.json()

            slow = await call("POST", body={"kind": "slow", "factor": 2})  # until cleared
            burst = await call("POST", body={"kind": "error", "rate": 0.5, "duration_s": 5})
            drift = await call("POST", body={"kind": "drift"})
            before = await call("GET")
            clock.advance(6)  # the error burst runs out
            await call("DELETE", f"/{drift['id']}")  # and the drift is cleared
            after = await call("GET")
            code = await asyncio.to_thread(main, ["sim", "faults", url])  # the CLI prints what the instance lists
            assert [slow["id"], burst["id"], drift["id"]] == ["f1", "f2", "f3"]
            return before, after, code

    before, after, code = asyncio.run(scenario())
    assert _ids(before["active"]) == ["f1", "f2", "f3"] and before["history"] == []
    assert _ids(after["active"]) == ["f1"] and after["active"][0]["ended_at"] is None
    assert [(r["id"], r["end_reason"]) for r in after["history"]] == [("f2", "duration"), ("f3", "cleared")]
    assert all(r["ended_at"] is not None for r in after["history"])
    assert code == 0 and json.loads(capsys.readouterr().out) == after
