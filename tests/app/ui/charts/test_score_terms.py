"""app.ui.charts.score_terms: a DataFrame of weighted terms in, a stacked bar figure out."""

from __future__ import annotations

import pytest

from app.ui.charts.score_terms import score_terms_chart
from app.ui.data.trace_tables import score_terms_frame
from schemas import DecisionTrace
from tests.app import stub_trace_api as stub


def test_one_stacked_bar_per_candidate_one_trace_per_term(trace: DecisionTrace) -> None:
    fig = score_terms_chart(score_terms_frame(trace))

    assert fig.layout.barmode == "stack"
    assert [bar.name for bar in fig.data] == [w.name for w in trace.score_weights]
    for bar in fig.data:
        assert bar.orientation == "h"
        assert list(bar.y) == [stub.TOP_RANKED, stub.SELECTED_INSTANCE]
    # The best candidate is drawn on top: plotly lists categories bottom-up.
    assert list(fig.layout.yaxis.categoryarray) == [stub.SELECTED_INSTANCE, stub.TOP_RANKED]


def test_bar_lengths_are_the_weighted_terms(trace: DecisionTrace) -> None:
    fig = score_terms_chart(score_terms_frame(trace))

    top = {bar.name: bar.x[0] for bar in fig.data}
    assert top == pytest.approx({"queue-depth": 0.27, "kv-cache": 0.232, "latency": 0.24})
    raw, weight = fig.data[0].customdata[0]
    assert raw * weight == pytest.approx(fig.data[0].x[0])


def test_no_scored_candidate_gives_an_empty_figure(trace: DecisionTrace) -> None:
    fig = score_terms_chart(score_terms_frame(trace.model_copy(update={"candidates": []})))
    assert len(fig.data) == 0
