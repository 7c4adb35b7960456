"""The gateway's ``/metrics`` republishes the prober it follows: the one ``serve`` started or ``probes.follow_url``'s.

The audit's case: a gateway following a standalone prober (``probes.follow_url``) republished
none of its series (only the prober ``serve`` starts was), so the shipped Prometheus job, which
scrapes the gateway, fired ``RouteLensProberSilent{cause="absent"}`` on a healthy prober and no
probe alert could fire. Here the gateway is the application ``serve`` builds, on 127.0.0.1, and
the prober a loopback stub of its ``/metrics`` and feed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.run.gateway_app import build_gateway_app
from schemas.config import RouteLensConfig
from tests.app.run.test_storage_health import config, serving
from tests.router_core.gateway.test_probe_source_metrics import StubProber


async def _republished(tmp_path: Path, followed: bool) -> list[str]:
    stub = StubProber()
    async with stub.serving() as prober:
        base = config(tmp_path, tmp_path / "spool").model_dump(mode="json", exclude_unset=True)
        probes = {"enabled": False, "follow_url": prober} if followed else {"interval_s": 30}
        cfg = RouteLensConfig.model_validate({**base, "probes": probes})
        app = build_gateway_app(cfg, str(tmp_path / "t.duckdb"), probe_url=None if followed else prober)
        async with serving(app) as gateway:
            resp = await gateway.get("/metrics")
            assert resp.status == 200
            text = await resp.text()
    return [ln for ln in text.splitlines() if ln.startswith("routelens_probe_")]


@pytest.mark.parametrize("followed", [True, False], ids=["probes.follow_url", "the prober serve started"])
def test_the_followed_prober_s_series_are_on_the_gateway_s_metrics_once(tmp_path: Path, followed: bool) -> None:
    assert asyncio.run(_republished(tmp_path, followed)) == [
        'routelens_probe_verdict{instance="a",kind="syntax",model="m",verdict="failed"} 1.0',
        "routelens_probe_last_result_timestamp_seconds 1800000000.0"]
