"""Replaying under the policy that decided flips nothing where sibling instances had learned apart.

The gateway's quality table keeps an instance flagged worse than its siblings apart from its model
(``QualitySnapshot.instances``); the range replay rebuilt the table per model only, so both
siblings got one of the two values and requests moved to the worse one (4% of a product owner's
A/B replay, flipped by "term: quality" under the very same policy).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from app.experiments.replay_range import replay_range
from bench.replay_traces import T0, RouterTraceFactory, fleet_config
from router_core import QualitySnapshot
from schemas.queries import TraceFilter
from tests.app.experiments.seed import store_traces

INTENTS = ("contract", "ticket", "code", "math", "chat")


def test_siblings_that_learned_apart_replay_as_decided(tmp_path: Path) -> None:
    config = fleet_config()  # the balanced preset: quality weighs
    factory = RouterTraceFactory(config, seed=3, explicit_share=0.0)
    models = dict(factory.quality)
    worse = {spec.id for spec in factory.policy.fleet[::2]}  # every other instance learned a poor record
    factory.quality = QualitySnapshot(models, {(i, c): 0.05 for i in worse for c in INTENTS},  # type: ignore[assignment]
                                      frozenset((i, "*") for i in worse))
    traces = list(factory.traces(300))
    assert any(t.selected_instance not in worse for t in traces)
    db = store_traces(tmp_path / "traces.duckdb", traces)
    report = replay_range(db, T0, T0 + timedelta(hours=1), TraceFilter(), config)
    assert report.replayed == 300
    assert report.flips == 0, report.causes
