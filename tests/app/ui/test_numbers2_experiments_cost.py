"""The Experiments page's cost per request: the table's and the series' are one figure, and the page says what it is.

The table's was the mean over the requests with a recorded cost, the series' each bucket's cost sum
over all its requests: with requests no instance served (no cost), the two disagreed on one page.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.reader import DB_ENV
from app.ui.data import experiments as data
from app.ui.data import overview as overview_data
from app.ui.limits import CONFIG_ENV
from app.units import fmt
from ingest import DuckDBTraceStore
from schemas import DecisionTrace, OutcomeStatus
from schemas.experiments import CompareQuery
from schemas.queries import AggregateQuery, TraceFilter
from tests.app.ui.pages import open_app_page
from tests.app.ui.test_experiments_page import CONFIG, PAGE
from tests.ingest.experiments.experiment_data import END, T0, experiment

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def _unserved(t: DecisionTrace) -> DecisionTrace:
    outcome = t.outcome.model_copy(update={"status": OutcomeStatus.ERROR, "http_status": 503, "cost": None})
    return t.model_copy(update={"outcome": outcome})


@pytest.fixture
def db(tmp_path: Path) -> Path:
    traces, feedback = experiment(150, 150)
    path = tmp_path / "exp.duckdb"
    store = DuckDBTraceStore(path)
    store.write_records([_unserved(t) if i % 5 == 2 else t for i, t in enumerate(traces)])
    store.write_records(feedback)
    store.close()
    return path


def test_the_tables_cost_per_request_is_the_series_cost_over_its_requests(db: Path) -> None:
    store = DuckDBTraceStore(db, read_only=True)
    report = store.compare(CompareQuery(a="a", b="b", start=T0, end=END))
    per_side = store.experiment_series("arm", "a", "b", AggregateQuery(filter=TraceFilter(start=T0, end=END),
                                                                       bucket="5m"))
    store.close()
    frame = data.series(per_side, T0, END, "5m")
    table = data.metric_table(report.model_dump(mode="json"))
    row = table[table["metric"] == "cost per request"].iloc[0]
    for side, column in (("a", "A"), ("b", "B")):
        mine = frame[frame["side"] == side]
        whole = float(mine["cost"].sum()) / float(mine["requests"].sum())
        assert getattr(report.metrics["cost_per_request"], side) == pytest.approx(whole, rel=1e-12)
        assert row[column] == fmt(whole, "cost")


def test_the_page_and_the_overview_say_what_each_cost_is(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    config = db.parent / "routelens.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    at = open_app_page(PAGE, monkeypatch, {DB_ENV: str(db), CONFIG_ENV: str(config)}, end=END.isoformat())
    assert not at.exception  # type: ignore[attr-defined]
    assert any(c.value == data.FIGURES_NOTE for c in at.caption)  # type: ignore[attr-defined]
    table = at.dataframe[0].value  # type: ignore[attr-defined]
    note = table[table["metric"] == "cost per request"].iloc[0]["note"]
    assert "every request" in note and "count 0" in note
    cost = next(h for h in overview_data.headlines(overview_data.series([]), overview_data.series([]))
                if h.label == "Cost")
    assert cost.help.startswith("a sum, not a mean")
