"""app.ui.charts.experiments: one line per side and panel; the flip heatmap's cells."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from app.ui.charts import experiments as charts
from app.ui.data import experiments as data
from schemas.queries import BucketStats

T = datetime(2026, 11, 1, 9, tzinfo=UTC)


def test_series_chart_has_a_line_per_side_and_panel() -> None:
    b = [BucketStats(start=T + timedelta(hours=k), requests=10, errors=1, fallbacks=0, fallback_rate=0.0,
                     latency_p95_ms=100.0, cost=3.0) for k in range(2)]
    fig = charts.series_chart(data.series({"a": b, "b": b}), "1h")
    names = [t.name for t in fig.data]
    assert len(names) == 8 and names[0] == "a · requests" and names[-1] == "b · cost"
    colours = {t.name.split(" · ")[0]: t.line.color for t in fig.data}
    assert colours == {"a": charts.SIDE_COLOURS[0], "b": charts.SIDE_COLOURS[1]}
    assert sum(bool(t.showlegend) for t in fig.data) == 2 and fig.layout.title.text == "Per 1-hour bucket"


def test_the_filling_bucket_is_a_dotted_stub_under_a_shaded_band() -> None:
    b = [BucketStats(start=T + timedelta(minutes=k), requests=10, errors=1, fallbacks=0, fallback_rate=0.0,
                     latency_p95_ms=100.0, cost=3.0) for k in range(3)]
    end = T + timedelta(minutes=2, seconds=20)
    fig = charts.series_chart(data.series({"a": b}, T, end, "1m"), "1m", T, end)
    solid = next(t for t in fig.data if t.name == "a · requests")
    stub = next(t for t in fig.data if t.name == "a · requests (filling)")
    assert pd.isna(solid.y[-1]) and list(stub.y) == [10, 10] and stub.line.dash == "dot"
    assert {s.x0 for s in fig.layout.shapes} == {T + timedelta(minutes=2)}  # one band across the panels
    assert fig.layout.annotations[-1].text == "filling"
    assert list(fig.layout.xaxis.range) == [T, end]


def test_flip_heatmap_cells() -> None:
    pairs = pd.DataFrame({"live_model": ["m", "m", "n"], "shadow_model": ["m", "n", "n"]})
    fig = charts.flip_heatmap(data.flip_matrix(pairs))
    (heat,) = fig.data
    assert list(heat.x) == ["m", "n"] and list(heat.y) == ["m", "n"]
    assert [list(r) for r in heat.z] == [[1, 1], [0, 1]]
    assert heat.text[0][1] == "1 (50% of m)"


def test_an_empty_matrix_draws_an_empty_heatmap() -> None:
    (heat,) = charts.flip_heatmap(pd.DataFrame()).data
    assert list(heat.z or []) == []
