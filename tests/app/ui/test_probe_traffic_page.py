"""Probes linked to traffic, on a real DuckDB file: a drifting instance's bad window lists the requests it
served then, each with where its own stored policy sends it without the instance; a trace shows the
probe verdicts of its instance at that moment and links back to the window."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.ui import ENTRYPOINT
from ingest.duckdb.store import DuckDBTraceStore
from router_core.decide.decision import DecisionContext
from router_core.decide.policy_doc import canonical, document_hash, policy_document
from router_core.state.quality import QualityTable
from schemas.common import ProbeKind, ProbeVerdict
from schemas.policy_record import PolicyRecord
from schemas.probe import ProbeResult
from tests.app.ui.pages import open_app_page
from tests.router_core.conftest import features, healthy, make_config
from tests.router_core.decide.test_exact_replay import live

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


@pytest.fixture(scope="module")
def start() -> datetime:
    """The pages read windows ending at the wall clock: the data is placed in the minutes before the
    module's first test (not before the suite's collection, which may be many minutes earlier)."""
    return datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=8)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, start: datetime) -> Iterator[tuple[Path, str, list[str]]]:
    """The file, the drifting instance, and the requests it served (its own, in time order)."""
    config = make_config()
    doc = policy_document(config, None)
    record = PolicyRecord(policy_hash=document_hash(doc), ts=start, router_version="t", document=canonical(doc))
    traces = []
    for i in range(12):  # two a minute from start; the instance drifts from minute 2 to minute 4
        now = start + timedelta(seconds=5 + 30 * i)
        state = {k: v.model_copy(update={"scraped_at": now - timedelta(seconds=0.5)}) for k, v in healthy().items()}
        ctx = DecisionContext(request_id=f"req_w{i}", features=features(), intent="chat", now=now,
                              quality=QualityTable(config.models).snapshot())
        traces.append(live(config, state, ctx).model_copy(update={"policy_hash": record.policy_hash}))
    chosen = traces[4].selected_instance  # the first request of minute 2
    assert chosen is not None and not any(t.fallback_triggered for t in traces)
    probes = [ProbeResult(probe_id=f"p{m}", ts=start + timedelta(minutes=m), instance=chosen, model="big",
                          kind=ProbeKind.SEMANTIC, verdict=ProbeVerdict.FAILED if m in (2, 3) else ProbeVerdict.OK,
                          value=0.5 if m in (2, 3) else 0.95, threshold=0.8,
                          reason="cosine 0.50 below 0.80" if m in (2, 3) else "") for m in range(6)]
    path = tmp_path_factory.mktemp("probe_traffic") / "traces.duckdb"
    store = DuckDBTraceStore(path)
    try:
        store.write_records([record, *traces, *probes])
    finally:
        store.close()
    yield path, chosen, [t.request_id for t in traces if t.selected_instance == chosen]


def _page(monkeypatch: pytest.MonkeyPatch, path: Path, page: str, **params: str) -> AppTest:
    return open_app_page(page, monkeypatch, {"ROUTELENS_DB": str(path)}, **params)


def _trace_page(monkeypatch: pytest.MonkeyPatch, path: Path, request_id: str) -> AppTest:
    monkeypatch.setenv("ROUTELENS_DB", str(path))
    at = AppTest.from_file(str(ENTRYPOINT), default_timeout=30)
    at.run()  # the root first, then the drill-down at /trace?request_id= (as a link from a table opens it)
    at.query_params["request_id"] = request_id
    at.switch_page("views/trace_explorer.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_bad_window_lists_what_the_instance_served_and_where_it_would_have_gone(
        monkeypatch: pytest.MonkeyPatch, db: tuple[Path, str, list[str]], start: datetime) -> None:
    path, chosen, ids = db
    at = _page(monkeypatch, path, "views/probes.py", instance=chosen)
    assert f"When {chosen} was bad, and the requests it served" in [s.value for s in at.subheader]
    assert at.selectbox(key="bad_window").value.startswith(f"{start + timedelta(minutes=2):%Y-%m-%d %H:%M:%S} to ")
    served = next(d.value for d in at.dataframe if "without it" in d.value.columns)
    inside = [i for i in ids if 4 <= int(i.removeprefix("req_w")) < 8]  # served in minutes 2 and 3
    assert sorted(served["request"].str.extract(r"request_id=(\w+)")[0]) == sorted(inside) and inside
    elsewhere = set(served["without it"])
    assert len(elsewhere) == 1 and chosen not in next(iter(elsewhere)) and " / " in next(iter(elsewhere))
    assert not next(iter(elsewhere)).startswith(("unknown", "nowhere"))
    assert any("cosine 0.50 below 0.80" in t.value for t in at.text)


def test_a_trace_shows_its_instance_s_probes_then_and_links_to_the_window(
        monkeypatch: pytest.MonkeyPatch, db: tuple[Path, str, list[str]]) -> None:
    path, chosen, ids = db
    (during,) = [i for i in ids if i == "req_w4"]  # 2 min 5 s in: the failed result of minute 2 is 5 s old
    at = _trace_page(monkeypatch, path, during)
    assert f"Probes of {chosen} at that moment" in [s.value for s in at.subheader]
    rows = next(d.value for d in at.dataframe if "seconds before" in d.value.columns)
    assert rows[["kind", "verdict", "seconds before"]].values.tolist() == [["semantic", "failed", 5]]
    assert any(f"probes?instance={chosen}&at=" in str(m.value) for m in at.markdown)
    after = next(i for i in ids if int(i.removeprefix("req_w")) >= 8)  # minute 4 on: passing again
    calm = _trace_page(monkeypatch, path, after)
    rows = next(d.value for d in calm.dataframe if "seconds before" in d.value.columns)
    assert rows["verdict"].tolist() == ["ok"] and not any("probes?instance=" in str(m.value) for m in calm.markdown)
