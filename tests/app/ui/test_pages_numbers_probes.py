"""The Probes page's readings against the verdicts they explain (audit of a real run).

The run's latency probe of coder-6b-a measured a p95 of 91.94 ms against a band of 91.98–137.97 ms
(±20% of 114.97 ms) and was rightly degraded; the page read it "92 ms / 92–138 ms", inside its own
band. A file store with ``ROUTELENS_LIVE_URL`` had no active alerts and no router verdicts here while
the Overview and Fleet pages read them from that gateway.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.reader import DB_ENV
from app.ui.data.fleet import LIVE_ENV
from app.ui.limits import load_limits
from ingest.duckdb.store import DuckDBTraceStore
from tests.app import stub_trace_api as stub
from tests.app.ui.pages import open_app_page

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")
LIMITS = load_limits({})


def test_a_latency_just_out_of_its_band_does_not_read_inside_it() -> None:
    bound = LIMITS.probe("latency", baseline=114.97203304970755)
    assert bound is not None
    assert bound.verdict(91.9445, "degraded") == "degraded"
    assert bound.text(91.9445) == "91.9 ms / 92.0–138 ms"
    assert bound.text(138.0) == "138.00 ms / 92–137.97 ms"
    assert bound.text(100.0) == "100 ms / 92–138 ms"  # apart already: unchanged


@pytest.mark.parametrize(("metric", "value", "shown"), [
    ("kv_cache_usage", 0.8504, "85.04% / 85.00%"),  # past the 85% constraint: not "85% / 85%"
    ("kv_cache_usage", 0.92, "92% / 85%"),
    ("queue", 10.0, "10 / 10 requests"),
    ("kv_cache_usage", None, "— / 85%"),
])
def test_a_metric_past_its_limit_never_reads_as_the_limit(metric: str, value: float | None, shown: str) -> None:
    assert LIMITS.text(metric, value) == shown


def test_a_latch_value_past_its_threshold_never_reads_as_the_threshold() -> None:
    assert LIMITS.latch_text("kv-cache", 0.8504) == "85.04% / 85.00%"


def test_a_file_store_reads_alerts_and_verdicts_from_the_live_gateway(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    DuckDBTraceStore(tmp_path / "t.duckdb").close()
    now = datetime.now(UTC)
    with stub.StubTraceApi([], alerts=stub.sample_alerts(now), router_state=stub.sample_router_state(now)) as live:
        at = open_app_page("views/probes.py", monkeypatch, {DB_ENV: str(tmp_path / "t.duckdb"), LIVE_ENV: live.url})

    assert not at.warning, [w.value for w in at.warning]
    assert any(stub.ALERT_RULE in str(m.value) and "FIRING" in str(m.value) for m in at.markdown)
    verdicts = at.dataframe[0].value.set_index(["instance", "kind"])
    assert verdicts.loc[(stub.DRIFTING_INSTANCE, "semantic"), "router verdict"] == "failed"
