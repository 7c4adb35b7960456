"""``replay --policy``'s predicted latency delta counts rule-routed flips, and names the flips it cannot price.

Before, a rule-routed request re-decided by ``Router.decide`` kept no prepared candidates, so no flip
of one had a predicted latency: retargeting a rule flipped 117 of 120 requests and the delta was
``+0 over 3 requests``, the flips silently out of it. Now each flip whose trace holds the new
instance's state is priced from that state (as the latency scorer predicts it), and the basis says
how many flips are left out and why (the new instance was not a candidate then: no state of it).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from app.experiments.replay_range import replay_range
from app.experiments.replayer import Replayer
from app.experiments.rows import ReplayRow, row_of
from app.experiments.tally import Tally
from router_core.decide.builtin import builtin_registry
from router_core.decide.policy import Policy, build_policy
from router_core.framework import Candidate
from router_core.scorers.latency import predicted_latency_ms
from router_core.state.staleness import effective_state
from schemas.config import ModelProfile
from schemas.queries import TraceFilter
from schemas.trace import DecisionTrace
from tests.app.experiments.seed import T0, store_traces
from tests.app.experiments.test_replay_rule_causes import DAY, N, _config, _rule_routed

NO_STATE = "newly chosen instance not among the stored candidates, so no state of it in the trace"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[DecisionTrace]]:
    tmp = tmp_path_factory.mktemp("rule-latency")
    traces = _rule_routed(_config(tmp, "deepseek-v4-32k"), N)
    return store_traces(tmp / "traces.duckdb", traces), traces


def _predicted(policy: Policy, row: ReplayRow, instance: str) -> float:
    """The latency scorer's prediction for ``instance`` from the state the trace recorded, at the row's time."""
    spec = next(s for s in policy.fleet if s.id == instance)
    snap = row.states[instance]
    eff = effective_state(snap, row.ts, policy.scrape, policy.queue_norm)
    return predicted_latency_ms(Candidate(spec, snap, eff), policy.models.get(spec.model, ModelProfile()))


def test_rule_routed_flips_are_priced_from_the_trace_and_the_rest_are_named(
        stored: tuple[Path, list[DecisionTrace]], tmp_path: Path) -> None:
    db, traces = stored
    config = _config(tmp_path, "qwen-72b")  # the rule now sends long inputs to qwen, whose state no trace holds
    report = replay_range(db, T0, DAY, TraceFilter(), config)
    policy = build_policy(config, builtin_registry())
    replayer = Replayer(policy)
    delta, priced, unpriced = 0.0, 0, 0
    for row in map(row_of, traces):
        got = replayer.decide(row)
        if got.instance is None or got.instance == row.instance:
            continue
        if got.instance not in row.states:
            unpriced += 1
            continue
        priced += 1
        delta += _predicted(policy, row, got.instance) - _predicted(policy, row, row.instance)
    assert report.flips == priced + unpriced and priced > 0 and unpriced > 0
    assert report.latency.requests == report.replayed - unpriced
    assert report.latency.delta_total == pytest.approx(delta)
    assert report.latency.delta_mean == pytest.approx(delta / (report.replayed - unpriced))
    assert report.latency.basis.endswith(f"; leaves out {unpriced} flips: {NO_STATE} ({unpriced})")


def test_a_policy_that_flips_nothing_leaves_nothing_out(
        stored: tuple[Path, list[DecisionTrace]], tmp_path: Path) -> None:
    db, _ = stored
    report = replay_range(db, T0, DAY, TraceFilter(), _config(tmp_path, "deepseek-v4-32k"))
    assert report.flips == 0 and report.latency.requests == N and "leaves out" not in report.latency.basis


def test_merged_tallies_keep_what_they_left_out() -> None:
    """Parallel workers each count their own left-out flips; the merged tally keeps them all."""
    a, b = Tally(), Tally()
    a.latency.left_out["x"] += 2
    b.latency.left_out.update({"x": 1, "y": 4})
    a.merge(b)
    assert a.latency.left_out == Counter({"x": 3, "y": 4})
