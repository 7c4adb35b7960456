"""When did an unreachable instance's latches move? The store answers from what it stored.

A real :class:`StateView` scrapes a three-instance fleet once a second; ``big-a`` stops answering
for fifteen rounds, its state ages until its kv-cache latch goes out, then it comes back and the
latch comes in. Each round's snapshots and a decision on them are stored as the gateway stores
them (the store's own encoder), in a DuckDB file; the view's latches are the truth.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.ui.data.fleet import at_moment, read_back
from bench.synthetic import TraceFactory
from ingest.codec.encoder import Encoder
from ingest.duckdb.store import DuckDBTraceStore
from ingest.kinds import Kind
from ingest.record_sink import batch_of
from router_core.state.parse import EngineGauges
from router_core.state.view import StateView
from schemas.fleet import InstanceSnapshot, LatchState
from schemas.trace import DecisionTrace
from tests.router_core.conftest import make_config

WALL0 = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
KV = {"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85, "enter_below": 0.8, "exit_for": 2,
      "enter_for": 3}
DOWN = range(10, 25)  # rounds in which big-a does not answer
ROUNDS = 40
SCRAPE_S = 0.004  # a round's scrapes take this long before its tick: a latch moves after its scrape
WINDOW = (WALL0, WALL0 + timedelta(minutes=5))


@dataclass
class Run:
    records: list[Any]
    ticks: list[datetime]  # each round's tick (when its latches were evaluated)
    latch: list[LatchState]  # big-a's kv-cache latch after each round
    out: tuple[datetime, datetime]  # the truth: when it went out, when it came back


def fleet_run() -> Run:
    """Forty rounds of the fleet; a decision 0.3 s after each round, on the states as the router stamps them."""
    config = make_config(constraints=[KV])
    t = [1000.0]
    wall = lambda: WALL0 + timedelta(seconds=t[0] - 1000.0)  # noqa: E731
    view = StateView(config.fleet.instances, config.constraints, scrape=config.scrape, clock=lambda: t[0], wall=wall)
    factory = TraceFactory(seed=5, n_candidates=3)
    records: list[Any] = []
    ticks, latch = [], []
    for r in range(ROUNDS):
        t[0] = 1000.0 + r
        for iid in ("big-a", "big-b", "small-a"):
            if iid == "big-a" and r in DOWN:
                view.update(iid, None, "ConnectionRefusedError")
            else:
                view.update(iid, EngineGauges("vllm", 1, 1, 0.5 if iid == "big-a" else 0.2, None))
        t[0] += SCRAPE_S
        view.tick()
        ticks.append(wall())
        states = list(view.snapshot().values())
        records += states  # the round's snapshots (what on_round stores)
        latch.append(states[0].latches[0])
        ts = wall() + timedelta(seconds=0.3)
        base = factory.trace()
        cands = [c.model_copy(update={"instance": s.instance, "model": s.model, "state": s.model_copy(
            update={"age_s": (ts - s.scraped_at).total_seconds() if s.scraped_at else None})})
            for c, s in zip(base.candidates, states, strict=True)]
        records.append(base.model_copy(update={"ts": ts, "candidates": cands}))
    went_out = next(x.since for x in latch if x.out)
    came_in = next(x.since for x in latch if x.since and x.since > went_out and not x.out)
    assert went_out is not None and came_in is not None
    return Run(records, ticks, latch, (went_out, came_in))


@pytest.fixture(scope="module")
def run() -> Run:
    return fleet_run()


@pytest.fixture(scope="module")
def store(run: Run, tmp_path_factory: pytest.TempPathFactory) -> DuckDBTraceStore:
    st = DuckDBTraceStore(tmp_path_factory.mktemp("outage") / "t.duckdb")
    st.write_records(run.records)
    return st


def test_the_run_is_an_outage_whose_latch_moves_after_its_scrapes(run: Run) -> None:
    went_out, came_in = run.out
    assert run.ticks[DOWN[0]] < went_out < run.ticks[DOWN[-1]]  # out while unreachable
    back = next(r for r, x in enumerate(run.latch) if x.since == came_in)
    assert back > DOWN[-1]
    # Its scrape came first: a query that bounds an interval by the scrape's time ends it early.
    assert came_in - run.records[back * 4].scraped_at == timedelta(seconds=SCRAPE_S)


def test_the_outage_is_one_interval_from_the_latchs_own_moves(run: Run, store: DuckDBTraceStore) -> None:
    got = store.latch_intervals(*WINDOW, instance="big-a")
    # The old store gave several, all starting at the last good scrape, most of them zero-length.
    assert [(i.constraint, i.start, i.end) for i in got.intervals] == [("kv-cache", *run.out)]
    out_values = [x.value for x in run.latch if x.out and x.value is not None]
    assert got.intervals[0].peak == max(out_values)


def test_each_round_is_stored_at_its_tick(run: Run, store: DuckDBTraceStore) -> None:
    with store._cursor() as cur:  # noqa: SLF001  (the rows as stored)
        rows = cur.execute("SELECT seen_at, scraped_at, age_s FROM instance_snapshots WHERE instance = 'big-a' "
                           "AND age_s IS NOT NULL ORDER BY seen_at").fetchall()
    assert [seen for seen, _, _ in rows] == run.ticks  # one a round (each round's age differs)
    assert len({scraped for _, scraped, _ in rows}) == ROUNDS - len(DOWN)  # the outage's share one scrape


@pytest.mark.parametrize("second", [DOWN[0] + 2, DOWN[0] + 6, DOWN[-1] - 1, DOWN[-1] + 2])
def test_the_fleet_at_a_moment_of_the_outage_shows_that_moment(run: Run, store: DuckDBTraceStore,
                                                                  second: int) -> None:
    moment = run.ticks[second] + timedelta(seconds=0.5)  # after that round and its decision, before the next
    read = read_back(lambda s, e: store.snapshots(s, e), moment, expected=["big-a", "big-b", "small-a"])
    # Nothing observed after the moment is read (the old rows of the whole outage were all "seen" at its start).
    assert all(_observed(s) <= moment for s in read if s.instance == "big-a")
    shown = next(s for s in at_moment(read, moment) if s.instance == "big-a")
    assert shown.latches == [run.latch[second]]


def _observed(snap: InstanceSnapshot) -> datetime:
    assert snap.scraped_at is not None
    return snap.scraped_at + timedelta(seconds=snap.age_s or 0.0)


def test_a_store_written_before_the_fix_gets_the_same_intervals(run: Run, tmp_path: Path) -> None:
    """Rows the old encoder wrote keep their seen_at (a round's: its scrape's); the query reads each latch's since."""
    items, enc = [], Encoder()
    for kind, payload in [item for rec in run.records for item in enc.encode(rec)]:
        if kind is Kind.SNAPSHOT:
            row = orjson.loads(payload)
            if row["age_s"] is not None:  # a round's snapshot: the old seen_at
                row["seen_at"] = row["scraped_at"]
            payload = orjson.dumps(row)
        items.append((kind, payload))
    old = DuckDBTraceStore(tmp_path / "old.duckdb")
    old.write(old.prepare(batch_of(items)))
    got = old.latch_intervals(*WINDOW, instance="big-a")
    assert [(i.constraint, i.start, i.end) for i in got.intervals] == [("kv-cache", *run.out)]


def test_a_worker_whose_latch_never_moved_does_not_cut_anothers_interval(tmp_path: Path) -> None:
    """Two gateway workers each keep their own latches: one saw no errors (in, no since), one went out."""
    went_out, came_in = WALL0 + timedelta(seconds=10.5), WALL0 + timedelta(seconds=20.5)
    records: list[InstanceSnapshot] = []
    for s in range(0, 30):
        ts = WALL0 + timedelta(seconds=s)
        for worker, (out, since) in enumerate([(went_out <= ts < came_in, went_out if ts < came_in else came_in),
                                               (False, None)]):
            if worker == 0 and ts < went_out:
                since = None
            latch = LatchState(constraint="error-rate", out=out, since=since, value=0.5 if out else 0.01)
            records.append(InstanceSnapshot(instance="big-a", model="big", scraped_at=ts, age_s=0.1 * (worker + 1),
                                            latches=[latch]))
    st = DuckDBTraceStore(tmp_path / "w.duckdb")
    st.write_records(records)
    got = st.latch_intervals(*WINDOW)
    assert [(i.start, i.end, i.peak) for i in got.intervals] == [(went_out, came_in, 0.5)]


def test_a_gateway_restarted_while_a_latch_was_out_ends_its_interval(tmp_path: Path) -> None:
    """A restarted gateway's latches start in, dated by its start: the stretch ends there (it stayed open)."""
    went_out, restart = WALL0 + timedelta(seconds=10.5), WALL0 + timedelta(seconds=20)
    records = []
    for s in range(0, 30):
        ts = WALL0 + timedelta(seconds=s)
        if ts < went_out:
            latch = LatchState(constraint="error-rate", out=False, since=None, value=0.01)
        elif ts < restart:  # the old process: out since went_out, until it is killed
            latch = LatchState(constraint="error-rate", out=True, since=went_out, value=0.5)
        else:  # the new process: nothing seen yet, in since it began (StateView dates a latch that never moved)
            latch = view_latch(restart)
        records.append(InstanceSnapshot(instance="big-a", model="big", scraped_at=ts, age_s=0.0, latches=[latch]))
    st = DuckDBTraceStore(tmp_path / "r.duckdb")
    st.write_records(records)
    got = st.latch_intervals(*WINDOW)
    assert [(i.start, i.end, i.peak) for i in got.intervals] == [(went_out, restart, 0.5)]


def view_latch(began: datetime) -> LatchState:
    """The error-rate latch a new StateView begun at ``began`` shows before anything moved it."""
    cfg = make_config(constraints=[{"name": "error-rate", "metric": "error_rate", "threshold": 0.2}])
    view = StateView(cfg.fleet.instances, cfg.constraints, scrape=cfg.scrape, clock=lambda: 0.0, wall=lambda: began)
    view.tick()
    (latch,) = next(iter(view.snapshot().values())).latches
    assert not latch.out
    return latch


def test_a_decision_reads_back_its_state(run: Run, store: DuckDBTraceStore) -> None:
    """The states stored at decisions still join back to their traces (the trace's own age beside)."""
    last = run.records[-1]
    assert isinstance(last, DecisionTrace)
    got = store.get(last.request_id)
    assert got is not None and [c.state for c in got.candidates] == [c.state for c in last.candidates]
