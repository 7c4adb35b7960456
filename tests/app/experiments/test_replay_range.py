"""Replaying a time range of a real trace file: same policy, a banned model, sampled-out detail, filters."""

from __future__ import annotations

import statistics
from datetime import timedelta
from pathlib import Path

import pytest

from app.experiments import bulk
from app.experiments.replay_range import replay_range
from bench.replay_traces import CONSTRAINTS, fleet_config
from ingest.duckdb.store import DuckDBTraceStore
from schemas import Feedback
from schemas.queries import TraceFilter
from schemas.replay_report import NONE_TARGET
from schemas.trace import DecisionTrace
from tests.app.experiments.seed import STATE_ONLY, T0, decided, store_traces

DAY = T0 + timedelta(days=1)
BAN = {"name": "ban-qwen", "metric": "queue", "op": "<=", "threshold": -1, "models": ["qwen-72b"]}


@pytest.fixture(scope="module")
def traces() -> list[DecisionTrace]:
    return decided(500)


@pytest.fixture(scope="module")
def db(traces: list[DecisionTrace], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return store_traces(tmp_path_factory.mktemp("range") / "traces.duckdb", traces)


def test_the_same_policy_flips_nothing(db: Path, traces: list[DecisionTrace]) -> None:
    report = replay_range(db, T0, DAY, TraceFilter(), fleet_config(scoring=STATE_ONLY))
    assert (report.n, report.replayed, report.not_replayable) == (500, 500, 0)
    assert report.flips == 0 and report.flip_rate == 0.0
    assert report.flip_ci is not None and report.flip_ci[0] == 0.0 and 0 < report.flip_ci[1] < 0.01
    assert all(set(row) == {src} for src, row in report.matrix.items())
    assert sum(sum(row.values()) for row in report.matrix.values()) == 500
    assert report.causes == [] and report.cost.delta_total == 0.0


def test_dropping_a_model_from_the_fleet_flips_exactly_its_requests(db: Path, traces: list[DecisionTrace]) -> None:
    qwen = [t for t in traces if t.selected_model == "qwen-72b"]
    assert 20 < len(qwen) < 400
    report = replay_range(db, T0, DAY, TraceFilter(), fleet_config(scoring=STATE_ONLY, drop_model="qwen-72b"))
    assert report.flips == report.model_flips == len(qwen)
    assert set(report.matrix["qwen-72b"]) <= {NONE_TARGET, "deepseek-v4-32k", "deepseek-coder-6b-fp16"}
    for src, row in report.matrix.items():
        if src != "qwen-72b":
            assert row == {src: row[src]}
    explicit = sum(t.features.requested_model == "qwen-72b" for t in qwen)
    assert report.matrix["qwen-72b"].get(NONE_TARGET, 0) == explicit  # nothing else serves what asked for qwen
    kinds = {c.kind for c in report.causes}
    assert kinds <= {"fleet", "no_target"} and sum(c.flips for c in report.causes) == len(qwen)


def test_a_constraint_banning_a_model_flips_its_auto_requests(db: Path, traces: list[DecisionTrace]) -> None:
    auto = [t for t in traces if t.selected_model == "qwen-72b" and t.features.requested_model == "auto"]
    report = replay_range(db, T0, DAY, TraceFilter(), fleet_config(scoring=STATE_ONLY, constraints=[*CONSTRAINTS, BAN]))
    # Requests naming qwen fail open over all its (banned) instances: they stay on qwen, maybe another instance.
    assert report.model_flips == len(auto) and report.flips >= len(auto)
    qwen_instances = {t.selected_instance for t in traces if t.selected_model == "qwen-72b"}
    for src, row in report.instance_matrix.items():
        if src not in qwen_instances:
            assert row == {src: row[src]}
    assert report.causes[0].kind == "filter" and report.causes[0].name == "ban-qwen"
    assert report.causes[0].flips >= len(auto)
    assert report.cost.requests == report.replayed and report.cost.delta_total < 0  # qwen is the dearest
    assert report.latency.requests > 0 and "latency scorer" in report.latency.basis


def test_another_preset_flips_with_attributed_terms_and_an_interval(db: Path) -> None:
    report = replay_range(db, T0, DAY, TraceFilter(), fleet_config())
    assert 0 < report.flips < report.replayed
    assert report.flip_ci is not None and report.flip_ci[0] < report.flip_rate < report.flip_ci[1]  # type: ignore[operator]
    assert sum(c.flips for c in report.causes) == report.flips
    assert {c.kind for c in report.causes} <= {"term", "filter"}
    assert sum(sum(row.values()) for row in report.instance_matrix.values()) == report.replayed


def test_sampled_out_traces_are_counted_not_guessed(traces: list[DecisionTrace], tmp_path: Path) -> None:
    db = store_traces(tmp_path / "sampled.duckdb", traces[:300], detail_share=0.3)
    report = replay_range(db, T0, DAY, TraceFilter(), fleet_config(scoring=STATE_ONLY))
    assert report.n == 300 and 0 < report.not_replayable < 300
    assert report.replayed + report.not_replayable == 300
    (reason,) = report.not_replayable_reasons
    assert "sampled out" in reason and report.not_replayable_reasons[reason] == report.not_replayable
    assert report.flips == 0


def test_the_filter_and_the_window_narrow_the_traces(db: Path, traces: list[DecisionTrace]) -> None:
    mid = traces[250].ts
    report = replay_range(db, T0, mid, TraceFilter(experiment_arm="a"), fleet_config(scoring=STATE_ONLY))
    assert report.n == sum(t.experiment_arm == "a" and t.ts < mid for t in traces)
    assert report.filter == {"experiment_arm": "a"}


def test_two_processes_count_what_one_does(db: Path) -> None:
    seen: list[tuple[int, int]] = []
    one = replay_range(db, T0, DAY, TraceFilter(), fleet_config(), workers=1)
    two = replay_range(db, T0, DAY, TraceFilter(), fleet_config(), workers=2, progress=lambda d, t: seen.append((d, t)))
    keep = {"n", "replayed", "flips", "matrix", "instance_matrix", "causes"}
    assert one.model_dump(include=keep) == two.model_dump(include=keep)
    assert seen and seen[-1] == (two.n, two.n)  # the progress line counts both processes' traces, to the end


def test_forgetting_old_snapshots_between_batches_loses_none(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk._Snapshots, "MAX_KEPT", 40)
    monkeypatch.setattr(bulk, "BATCH_ROWS", 50)
    report = replay_range(db, T0, DAY, TraceFilter(), fleet_config(scoring=STATE_ONLY), workers=1)
    assert (report.replayed, report.not_replayable, report.flips) == (500, 0, 0)


def test_the_inverse_propensity_estimate_reads_logged_probabilities_costs_and_feedback(
        traces: list[DecisionTrace], tmp_path: Path) -> None:
    path = store_traces(tmp_path / "traces.duckdb", traces)
    wrong = {t.request_id: i % 3 == 0 for i, t in enumerate(traces[::4])}  # feedback on a quarter of them
    store = DuckDBTraceStore(path)
    store.write_records([Feedback(request_id=rid, ts=T0, correct=not bad) for rid, bad in wrong.items()])
    store.close()
    assert {t.selection_probability for t in traces} == {1.0}  # max-score: every logged pick had probability 1

    same = replay_range(path, T0, DAY, TraceFilter(), fleet_config(scoring=STATE_ONLY)).ips
    costs = [t.outcome.cost for t in traces if t.outcome.cost is not None]
    assert same["cost_per_request"].matched == len(costs)  # a request without a recorded cost is left out
    assert same["cost_per_request"].value == pytest.approx(statistics.fmean(costs))
    assert same["misroute_rate"].n == len(wrong)
    assert same["misroute_rate"].value == pytest.approx(sum(wrong.values()) / len(wrong))

    # Without qwen the candidate agrees with the log only where qwen was not chosen: those requests carry the estimate.
    kept = [t for t in traces if t.selected_model != "qwen-72b"]
    banned = replay_range(path, T0, DAY, TraceFilter(), fleet_config(scoring=STATE_ONLY, drop_model="qwen-72b")).ips
    kept_costs = [t.outcome.cost for t in kept if t.outcome.cost is not None]
    assert banned["cost_per_request"].matched == len(kept_costs)
    assert banned["cost_per_request"].value == pytest.approx(statistics.fmean(kept_costs))
    ci = banned["cost_per_request"].ci
    assert ci is not None and ci[0] <= banned["cost_per_request"].value <= ci[1]
