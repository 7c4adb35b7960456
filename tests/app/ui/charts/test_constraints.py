from __future__ import annotations

from app.ui.charts import constraints as ch
from app.ui.data import constraints as cd
from schemas.queries import ConstraintStat
from tests.app.ui.data.test_constraints import END, T0, at, snap


def test_state_chart_cells_colours_and_stale_label() -> None:
    payload = {"instances": [
        {"instance": "a", "model": "m", "latches": [{"constraint": "kv-cache", "out": False, "value": 0.4}]},
        {"instance": "b", "model": "m", "stale": True, "latches": [
            {"constraint": "kv-cache", "out": True, "value": 0.97}, {"constraint": "error-rate", "out": False}]},
    ]}
    (heat,) = ch.state_chart(cd.state_rows(payload)).data

    assert list(heat.x) == ["error-rate", "kv-cache"] and list(heat.y) == ["a", "b (stale)"]
    assert [list(r) for r in heat.text] == [["n/a", "in 0.4"], ["in", "out 0.97"]]
    codes = [list(r) for r in heat.z]
    colours = [[ch.STATE_COLOURS[list(ch.STATE_COLOURS)[c]] for c in r] for r in codes]
    assert colours == [["#e0e0e0", "#2e9e44"], ["#2e9e44", "#d62728"]]
    assert not ch.state_chart(cd.state_rows(None)).data


def test_timeline_open_and_closed_bars() -> None:
    snaps = [snap("a", 10, kv_cache=(True, 0.93, 9)), snap("a", 20, kv_cache=(False, 0.5, 19)),
             snap("a", 30, kv_cache=(True, 0.95, 30))]
    intervals = cd.latch_intervals(snaps, T0, END)
    fig = ch.timeline_chart(intervals, T0, END)

    closed, still = fig.data
    assert (closed.name, closed.marker.color) == ("out (closed again)", ch.CLOSED_COLOUR)
    assert (still.name, still.marker.color) == ("out (still)", ch.OPEN_COLOUR)
    assert list(closed.x) == [10 * 60_000.0] and list(still.x) == [30 * 60_000.0]  # the open one runs to END
    assert list(closed.base) == [at(9)] and list(still.y) == ["a · kv-cache"]
    assert fig.layout.xaxis.type == "date" and list(fig.layout.xaxis.range) == [T0, END]
    assert not ch.timeline_chart(cd.latch_intervals([], T0, END), T0, END).data


def test_binding_chart_stacks_removals_and_marks_soft() -> None:
    counts = cd.binding_counts([ConstraintStat(constraint="kv-cache", instance="a", model="m", removed=10,
                                               decisive=4, undecided=2, soft=1)])
    fig = ch.binding_chart(counts)

    assert [t.type for t in fig.data] == ["bar", "bar", "bar", "scatter"]
    assert [list(t.x) for t in fig.data] == [[4], [4], [2], [1]]
    assert [t.marker.color for t in fig.data] == [ch.BINDING_COLOURS[k] for k in
                                                  ("decisive", "not_decisive", "undecided", "soft")]
    assert fig.layout.barmode == "stack"
    assert not ch.binding_chart(cd.binding_counts([])).data
