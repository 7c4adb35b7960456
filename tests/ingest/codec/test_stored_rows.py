"""Reading stored rows back: a snapshot an older version stored with an impossible gauge still reads."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.synthetic import TraceFactory
from ingest import DuckDBTraceStore
from ingest.codec.stored_rows import readable_state


@pytest.mark.parametrize(("gauges", "dropped"), [
    ({"queue": -5.0}, ["queue"]),
    ({"running": float("nan"), "kv_cache_usage": 1.7}, ["running", "kv_cache_usage"]),
    ({"warmup_progress": -0.1, "error_rate": 2.0}, ["warmup_progress", "error_rate"]),
    ({"queue": 3.0, "kv_cache_usage": 1.0}, []),
], ids=["negative-queue", "nan-and-kv-above-one", "warmup-and-error-rate", "in-range"])
def test_out_of_range_gauges_are_dropped_and_named(gauges: dict[str, float], dropped: list[str]) -> None:
    state = {"instance": "a", "model": "m", "scrape_error": None, **gauges}
    out = readable_state(state)
    assert [k for k in gauges if out[k] is None] == dropped
    assert all(out[k] == v for k, v in gauges.items() if k not in dropped and not math.isnan(v))
    if dropped:
        assert out["scrape_error"].startswith("out_of_range on read: ")
        assert all(k in out["scrape_error"] for k in dropped)
    else:
        assert out is state


def test_a_trace_stored_with_a_negative_queue_reads_back(tmp_path: Path) -> None:
    trace = next(iter(TraceFactory(seed=5, n_candidates=2, round_every=1).traces(1)))
    cand = trace.candidates[0]
    assert cand.state is not None
    bad_state = cand.state.model_construct(**{**cand.state.__dict__, "queue": -5.0})  # what an old scrape let in
    bad = trace.model_copy(update={"candidates": [cand.model_copy(update={"state": bad_state}), *trace.candidates[1:]]})
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    store.write_records([bad])
    back = store.get(trace.request_id)
    store.close()
    assert back is not None and back.candidates[0].state is not None
    assert back.candidates[0].state.queue is None
    assert "queue=-5.0 dropped" in (back.candidates[0].state.scrape_error or "")
