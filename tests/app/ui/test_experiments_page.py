"""The "Experiments" page, run by AppTest over a seeded DuckDB file: metric table, SRM, series, shadow flips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.reader import DB_ENV
from app.ui.limits import CONFIG_ENV
from ingest import DuckDBTraceStore
from schemas import ShadowDecision
from schemas.trace import DecisionTrace
from tests.app.ui.pages import assert_clean, open_app_page
from tests.ingest.experiments.experiment_data import END, experiment

PAGE = "views/experiments.py"
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def _shadowed(t: DecisionTrace, k: int) -> DecisionTrace:
    flipped = k % 4 == 0
    return t.model_copy(update={"shadow": ShadowDecision(
        router_version="v2.5-shadow", policy_hash="sha256:cccccccccccccccc",
        selected_model="qwen3-8b" if flipped else t.selected_model,
        selected_instance="q-a" if flipped else t.selected_instance, live_rank=2 if flipped else 1,
        flipped=flipped, latency_ms=0.2)})


@pytest.fixture
def db(tmp_path: Path) -> Path:
    traces, feedback = experiment(150, 150)
    traces = [_shadowed(t, k) if k % 2 == 0 else t for k, t in enumerate(traces)]
    path = tmp_path / "exp.duckdb"
    store = DuckDBTraceStore(path)
    store.write_records(traces)
    store.write_records(feedback)
    store.close()
    return path


# The configuration the app reads: the arms' designed shares the split is checked against.
CONFIG = """
fleet:
  instances:
    - {id: i1, model: m, url: "http://127.0.0.1:1"}
experiments:
  arms:
    - {name: a, router_version: v2.3, share: 0.5}
    - {name: b, router_version: v2.4, share: 0.5}
"""


def open_page(monkeypatch: pytest.MonkeyPatch, db: Path, **params: str) -> object:
    config = db.parent / "routelens.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    return open_app_page(PAGE, monkeypatch, {DB_ENV: str(db), CONFIG_ENV: str(config)},
                         **{"end": END.isoformat(), **params})


def test_two_arms_metric_table_series_and_flips(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    at = open_page(monkeypatch, db)
    assert not at.error and not at.warning  # type: ignore[attr-defined]
    assert_clean(at)  # type: ignore[arg-type]
    assert (at.selectbox(key="side_a").value, at.selectbox(key="side_b").value) == ("a", "b")  # type: ignore[attr-defined]
    assert any("Split as designed" in s.value for s in at.success)  # type: ignore[attr-defined]
    table = at.dataframe[0].value  # type: ignore[attr-defined]
    assert list(table["metric"])[:2] == ["error rate", "fallback rate"]
    cost = table[table["metric"] == "cost per request"].iloc[0]
    assert str(cost["CI high"]).startswith("−")  # b is 20% cheaper: the interval excludes zero
    assert str(cost["A"]).endswith(" cost units") and "None" not in table.to_string()
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]  # type: ignore[attr-defined]
    series, heat = charts
    names = {t["name"] for t in series["data"]}
    assert {"a · requests", "b · requests", "a · cost", "b · latency p95 (ms)"} <= names
    assert "range" in series["layout"]["xaxis"]  # the axis spans the data, not a millisecond around one point
    requests_a = next(t for t in series["data"] if t["name"] == "a · requests")
    assert len(requests_a["x"]) >= 20  # the bucket follows the span that holds data: a line, not a dot
    assert heat["data"][0]["type"] == "heatmap" and "qwen3-8b" in heat["data"][0]["x"]
    # The sentence's model changes are the grid's off-diagonal cells, counted the same way.
    grid = heat["data"][0]
    off = sum(v for i, row in enumerate(grid["z"]) for j, v in enumerate(row) if grid["y"][i] != grid["x"][j])
    summary = next(c.value for c in at.caption if "carry a shadow decision" in c.value)  # type: ignore[attr-defined]
    assert f"{off:,} model change" in summary and off > 0


def test_the_choice_is_kept_in_the_url(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    at = open_page(monkeypatch, db, a="b", b="a", by="version")
    assert not at.exception  # type: ignore[attr-defined]
    assert at.radio(key="by").value == "version"  # type: ignore[attr-defined]
    # versions are v2.3 / v2.4: the URL's a/b name arms, so the busiest versions are taken instead
    assert {at.selectbox(key="side_a").value, at.selectbox(key="side_b").value} == {"v2.3", "v2.4"}  # type: ignore[attr-defined]
    warned = [w.value for w in at.warning]  # type: ignore[attr-defined]
    assert warned == ["No requests of version `b` or `a` in this window: showing the busiest versions instead "
                      "(widen the window, or check the name)."]  # said, not silently replaced
    at.selectbox(key="side_a").set_value("v2.4").run()  # type: ignore[attr-defined]
    assert at.query_params["a"] == "v2.4" and at.query_params["by"] == "version"  # type: ignore[attr-defined]


def test_an_empty_window_says_how_to_run_an_experiment(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    at = open_page(monkeypatch, db, end="2020-01-01T00:00:00+00:00")
    assert any("experiments.arms" in i.value for i in at.info)  # type: ignore[attr-defined]
    assert not at.get("plotly_chart")  # type: ignore[attr-defined]


def test_an_unreachable_store_is_a_banner(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    at = open_app_page(PAGE, monkeypatch, {"ROUTELENS_API_URL": closed_port_url})
    assert any("unreachable" in e.value for e in at.error)  # type: ignore[attr-defined]


def test_only_the_p_values_are_said_to_be_holm_corrected(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    """The audit: 'intervals at 95%, Holm-corrected across the metrics' beside a latency CI excluding 0 and
    p (Holm) 0.12: the intervals are per metric (build_report adjusts the p-values only)."""
    at = open_page(monkeypatch, db)
    line = next(m.value for m in at.markdown if "Holm" in m.value)  # type: ignore[attr-defined]
    assert line.endswith("; 95% intervals per metric; p-values Holm-corrected across the metrics.")
    assert "intervals at" not in line
