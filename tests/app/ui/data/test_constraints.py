from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pandas as pd

from app.ui.data import constraints as cd
from schemas.fleet import InstanceSnapshot, LatchState
from schemas.queries import ConstraintStat
from schemas.records import RouterEvent

T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)
END = T0 + timedelta(minutes=60)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def snap(inst: str, minute: float, **latches: tuple[bool, float | None, float | None]) -> InstanceSnapshot:
    """latches: constraint -> (out, value, since minute)."""
    return InstanceSnapshot(instance=inst, model="m", scraped_at=at(minute), latches=[
        LatchState(constraint=c.replace("_", "-"), out=o, value=v, since=None if s is None else at(s))
        for c, (o, v, s) in latches.items()])


def test_state_rows_from_gateway_payload() -> None:
    payload = {"instances": [
        {"instance": "b", "model": "m", "stale": True,
         "latches": [{"constraint": "kv-cache", "out": True, "value": 0.97, "since": at(5).isoformat()}]},
        {"instance": "a", "model": "m", "latches": [
            {"constraint": "kv-cache", "out": False, "value": 0.4},
            {"constraint": "error-rate", "out": False, "value": None},
            {"constraint": "bad"},  # does not validate: skipped
        ]},
        {"no": "instance"},
    ], "scrape": {}}

    rows = cd.state_rows(payload)

    assert rows[["instance", "constraint", "state"]].values.tolist() == [
        ["a", "error-rate", "in"], ["a", "kv-cache", "in"], ["b", "kv-cache", "out"]]
    assert rows["stale"].tolist() == [False, False, True]
    assert rows["value"].iloc[2] == 0.97 and rows["since"].iloc[2] == at(5)
    assert cd.state_rows(None).empty and cd.state_rows({"instances": []}).empty
    assert len(cd.state_rows({"a": payload["instances"][1]})) == 2  # keyed by instance


def test_latch_intervals_closed_reopened_and_open_at_end() -> None:
    snaps = [
        snap("a", 1, kv_cache=(False, 0.5, None), error_rate=(True, 0.2, -10)),  # out before the window
        snap("a", 10, kv_cache=(True, 0.93, 9), error_rate=(True, 0.3, -10)),
        snap("a", 20, kv_cache=(True, 0.97, 9), error_rate=(False, 0.01, 15)),
        snap("a", 30, kv_cache=(False, 0.6, 29), error_rate=(False, 0.01, 15)),
        # since after the scrape: the state was judged after its last scrape (a crashed instance's snapshots
        # keep that scrape's time, their latches move on): the latch went out at its since, not at the scrape
        snap("a", 40, kv_cache=(True, 0.95, 50), error_rate=(False, 0.0, 15)),
        InstanceSnapshot(instance="a", model="m", latches=[LatchState(constraint="kv-cache", out=False)]),  # no ts
        snap("b", 5, kv_cache=(False, 0.1, None)),
    ]

    got = cd.latch_intervals(list(reversed(snaps)), T0, END)

    assert got[["instance", "constraint", "start", "is_open", "began_before"]].values.tolist() == [
        ["a", "error-rate", at(-10), False, True],
        ["a", "kv-cache", at(9), False, False],
        ["a", "kv-cache", at(50), True, False],
    ]
    assert got["end"].tolist()[:2] == [at(15), at(29)] and pd.isna(got["end"].iloc[2])
    assert got["duration_s"].tolist() == [25 * 60.0, 20 * 60.0, 10 * 60.0]
    assert got["peak"].tolist() == [0.3, 0.97, 0.95]


def test_latch_intervals_empty() -> None:
    got = cd.latch_intervals([snap("a", 1, kv_cache=(False, 0.1, None))], T0, END)
    assert got.empty and list(got.columns) == list(cd.INTERVAL_COLUMNS)


def test_latch_events_name_their_constraint() -> None:
    events = [
        RouterEvent(event_id="2", ts=at(3), kind="latch", instance="a", message="kv-cache out: 0.97 > 0.9"),
        RouterEvent(event_id="1", ts=at(1), kind="latch", instance="a", message="latch error-rate in"),
        RouterEvent(event_id="3", ts=at(2), kind="breaker", instance="a", message="kv-cache"),
        RouterEvent(event_id="4", ts=at(4), kind="latch", instance="a", message="something else"),
    ]
    got = cd.latch_events(events, ["kv-cache", "error-rate"])
    assert got["constraint"].tolist()[:2] == ["error-rate", "kv-cache"] and pd.isna(got["constraint"].iloc[2])
    assert got["ts"].tolist() == [at(1), at(3), at(4)]


def test_binding_counts_keep_undecided_apart() -> None:
    stats = [
        ConstraintStat(constraint="kv-cache", instance="a", model="m", removed=10, decisive=4, undecided=2, soft=1),
        ConstraintStat(constraint="kv-cache", instance="b", model="m", removed=5, decisive=1, undecided=0, soft=3),
        ConstraintStat(constraint="error-rate", instance="a", model="m", removed=3, decisive=0, undecided=3),
        ConstraintStat(constraint="context", instance="a", model="m", removed=0, soft=2),
    ]
    got = cd.binding_counts(stats).set_index("constraint")

    assert got.index.tolist() == ["kv-cache", "error-rate", "context"]
    kv = got.loc["kv-cache"]
    assert (kv["removed"], kv["decisive"], kv["not_decisive"], kv["undecided"], kv["soft"]) == (15, 5, 8, 2, 4)
    assert kv["decisive_share"] == 5 / 13 and kv["instances"] == 2
    assert got.loc["error-rate", "not_decisive"] == 0 and math.isnan(got.loc["error-rate", "decisive_share"])
    assert cd.binding_counts([]).empty


def test_chunk_spans_cover_the_window() -> None:
    spans = cd.chunk_spans(T0, END, 4)
    assert spans[0] == (T0, at(15)) and spans[-1] == (at(45), END)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert cd.chunk_spans(T0, END, 0) == [(T0, END)]
