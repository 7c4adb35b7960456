"""A candidate on an ``engine: external`` instance (never scraped, by design) reads "not scraped (external)"."""

from __future__ import annotations

from app.cli.trace_tree import render_trace
from app.ui.data.fleet import NOT_SCRAPED
from app.ui.data.trace_tables import state_table
from app.ui.limits import Limits
from schemas import DecisionTrace
from schemas.fleet import EXTERNAL
from tests.app.cli.test_trace_tree import as_text


def with_external_first(trace: DecisionTrace) -> DecisionTrace:
    first = trace.candidates[0]
    assert first.state is not None
    state = first.state.model_copy(update={"engine": EXTERNAL, "scraped_at": None, "age_s": None, "stale": False})
    return trace.model_copy(update={"candidates": [first.model_copy(update={"state": state}), *trace.candidates[1:]]})


def test_the_state_table_says_not_scraped_for_an_external_candidate_only(trace: DecisionTrace) -> None:
    table = state_table(with_external_first(trace), Limits(constraints=()))
    ages = dict(zip(table["instance"], table["age_s"], strict=True))
    assert ages[trace.candidates[0].instance] == NOT_SCRAPED
    assert all(age != NOT_SCRAPED for name, age in ages.items() if name != trace.candidates[0].instance)


def test_the_trace_tree_says_not_scraped_for_an_external_candidate(trace: DecisionTrace) -> None:
    assert NOT_SCRAPED not in as_text(render_trace(trace))
    assert NOT_SCRAPED in as_text(render_trace(with_external_first(trace)))
