"""The attempts timeline figure."""

from __future__ import annotations

from app.ui.charts.attempts import STATUS_COLOURS, attempts_chart
from app.ui.data.trace_tables import attempts_frame
from tests.app import stub_trace_api as stub


def test_attempts_run_one_after_another_coloured_by_status() -> None:
    fig = attempts_chart(attempts_frame(stub.sample_trace()))
    timeout, ok = fig.data
    assert (timeout.name, ok.name) == ("timeout", "ok")
    assert list(timeout.base) == [0.0] and list(timeout.x) == [3000.0]
    assert list(ok.base) == [3000.0] and list(ok.x) == [812.0]  # starts where the timeout ended
    assert list(ok.y) == [f"#1 {stub.SELECTED_INSTANCE}"]
    assert timeout.marker.color == STATUS_COLOURS["timeout"] and ok.marker.color == STATUS_COLOURS["ok"]
    assert list(timeout.customdata[0]) == ["—", "ReadTimeout"]
    assert fig.layout.yaxis.categoryarray == (f"#1 {stub.SELECTED_INSTANCE}", f"#0 {stub.TOP_RANKED}")


def test_no_attempts_no_bars() -> None:
    empty = stub.sample_trace().model_copy(update={"attempts": []})
    assert attempts_chart(attempts_frame(empty)).data == ()
