"""The Overview's latency headlines are the window's own quantiles, checked against numpy over the seeded traces.

They used to be the request-weighted mean of the buckets' quantiles: over a 1-hour window of
1-minute buckets holding a request or two each, "Latency p99" read about the mean latency.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from aiohttp import web

from app.reader import DB_ENV
from app.ui.data import overview as data
from app.units import fmt
from ingest.duckdb.store import DuckDBTraceStore
from ingest.http_api.client import HttpTraceStore
from ingest.http_api.routes import IngestApi
from schemas import Outcome, OutcomeStatus
from schemas.queries import AggregateQuery, TraceFilter
from tests.app.ui.pages import open_app_page
from tests.factories import make_trace

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")
QUANTILES = {"latency_p50_ms": 0.5, "latency_p95_ms": 0.95, "latency_p99_ms": 0.99}


def seed(path: Path, start: datetime, n: int, *, sealed_by: datetime) -> list[float]:
    """``n`` traces a minute apart from ``start``: mostly fast, a slow tail; the store sealed up to ``sealed_by``."""
    rng = random.Random(11)
    lat = [rng.uniform(15, 40) if rng.random() > 0.1 else rng.uniform(1500, 4000) for _ in range(n)]
    traces = [make_trace(f"req_q_{start:%H%M}_{i:03d}", ts=start + timedelta(minutes=i, seconds=7),
                         outcome=Outcome(status=OutcomeStatus.OK, http_status=200, cost=1.0, total_ms=ms))
              for i, ms in enumerate(lat)]
    store = DuckDBTraceStore(path, clock=lambda: sealed_by)
    store.write_records(traces)
    store.close()
    return lat


def expected(lat: list[float]) -> dict[str, float]:
    """quantile_cont's definition (numpy's linear), over every request of the window."""
    return {k: float(np.quantile(lat, q)) for k, q in QUANTILES.items()}


@pytest.mark.parametrize("sealed", [False, True], ids=["traces", "rollup"])
def test_window_stats_are_the_windows_own_quantiles(tmp_path: Path, sealed: bool) -> None:
    start = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    lat = seed(tmp_path / "t.duckdb", start, 50, sealed_by=start + timedelta(hours=3 if sealed else -1))
    flt = TraceFilter(start=start, end=start + timedelta(hours=1))
    store = DuckDBTraceStore(tmp_path / "t.duckdb", read_only=True)
    try:
        window = store.window_stats(flt)
        buckets = store.aggregate(AggregateQuery.model_validate({"filter": flt, "bucket": "1m"}))
    finally:
        store.close()
    assert window is not None and window.requests == 50 and window.start == start
    for key, value in expected(lat).items():
        assert getattr(window, key) == pytest.approx(value, rel=0.011 if sealed else 1e-9), key
    # the old headline (request-weighted mean of the 1-minute buckets' p99) is nowhere near the window's p99
    frame = data.series(buckets, flt.start, flt.end, "1m")
    old = data.headlines(frame, frame.iloc[0:0])[5]
    assert old.label == "Latency p99" and old.value is not None
    assert abs(old.value - expected(lat)["latency_p99_ms"]) > 0.5 * expected(lat)["latency_p99_ms"]
    new = data.headlines(frame, frame.iloc[0:0], windows=(window, None))
    assert {h.label: h.value for h in new}["Latency p99"] == window.latency_p99_ms


@pytest.fixture
def api_url(tmp_path: Path) -> Iterator[tuple[str, list[float], datetime]]:
    """The query API over a seeded file on 127.0.0.1 (the store only; no emitter is needed to read)."""
    start = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    lat = seed(tmp_path / "t.duckdb", start, 30, sealed_by=start - timedelta(hours=1))
    store = DuckDBTraceStore(tmp_path / "t.duckdb", read_only=True)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, object] = {}

    async def up() -> None:
        app = web.Application()
        IngestApi(None, store, max_body=1 << 20).add_routes(app)  # type: ignore[arg-type]
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["runner"] = runner
        box["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(up()), loop.run_forever()), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield f"http://127.0.0.1:{box['port']}", lat, start
    asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(10)  # type: ignore[attr-defined]
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()
    store.close()


def test_the_query_api_answers_the_same_window_figures(api_url: tuple[str, list[float], datetime]) -> None:
    url, lat, start = api_url
    flt = TraceFilter(start=start, end=start + timedelta(hours=1))
    window = HttpTraceStore(url).window_stats(flt)
    assert window is not None and window.requests == len(lat)
    for key, value in expected(lat).items():
        assert getattr(window, key) == pytest.approx(value, rel=1e-9), key
    assert HttpTraceStore(url).window_stats(TraceFilter(start=start - timedelta(days=1), end=start)) is None


def test_the_page_shows_the_windows_quantiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    lat = seed(tmp_path / "p.duckdb", now - timedelta(minutes=50), 40, sealed_by=now - timedelta(hours=2))
    at = open_app_page("views/overview.py", monkeypatch, {DB_ENV: str(tmp_path / "p.duckdb")}, window="1h")
    shown = {m.label: m.value for m in at.metric}
    assert shown["Requests"] == "40"
    want = expected(lat)
    assert shown["Latency p50"] == fmt(want["latency_p50_ms"], "ms")
    assert shown["Latency p95"] == fmt(want["latency_p95_ms"], "ms")
    assert shown["Latency p99"] == fmt(want["latency_p99_ms"], "ms")
