"""What the fleet charts draw of a big fleet (pure frames; the pages are in tests/app/ui/test_big_fleet_pages.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from app.ui.data.big_fleet import latches_to_draw, longest_out, top_scored

T0 = datetime(2026, 12, 7, 5, 0, tzinfo=UTC)


def test_the_chosen_candidate_is_drawn_even_when_a_retry_served_it_from_far_down() -> None:
    terms = pd.DataFrame({"instance": [f"i{k:03d}" for k in range(200) for _ in range(2)], "term": ["q", "c"] * 200,
                          "raw": 0.5, "weight": 0.5, "weighted": 0.25})
    drawn, left_out = top_scored(terms, keep=("i150", None), n=20)
    assert list(dict.fromkeys(drawn["instance"])) == [f"i{k:03d}" for k in range(20)] + ["i150"]
    assert left_out == 179 and len(drawn) == 42


def test_a_small_fleet_is_drawn_whole() -> None:
    rows = pd.DataFrame({"instance": ["a", "a", "b"], "constraint": ["kv", "q", "kv"], "state": ["in"] * 3,
                         "stale": [False] * 3})
    kept, quiet = latches_to_draw(rows, n=40)
    assert kept.equals(rows) and quiet == 0


def test_a_stale_instance_is_drawn_with_those_held_out() -> None:
    rows = pd.DataFrame({"instance": [f"i{k:03d}" for k in range(50)], "constraint": "kv",
                         "state": ["out" if k == 7 else "in" for k in range(50)],
                         "stale": [k == 30 for k in range(50)]})
    kept, quiet = latches_to_draw(rows, n=40)
    assert list(kept["instance"]) == ["i007", "i030"] and quiet == 48


def test_the_latches_out_longest_are_drawn_with_every_interval_of_theirs() -> None:
    rows = []
    for k in range(60):  # instance k out twice, for k and k + 1 seconds
        for d in (k, k + 1):
            rows.append({"instance": f"i{k:03d}", "constraint": "queue", "start": T0, "end": T0 + timedelta(seconds=d),
                         "duration_s": float(d)})
    frame = pd.DataFrame(rows)
    kept, hidden = longest_out(frame, n=40)
    assert set(kept["instance"]) == {f"i{k:03d}" for k in range(20, 60)} and len(kept) == 80 and hidden == 20
