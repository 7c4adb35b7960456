"""The trace view and the Probes page over an older trace file (``app --db``: read-only, never migrated).

One file holds traces whose ``ts`` lies outside 1970 .. 9999 (stored before the intake refused
such a time): the trace view failed on them. Another holds ``probe_results`` in the first layout
(``ok`` where today's has ``verdict``): the Probes page failed on it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.reader import DB_ENV
from app.ui import ENTRYPOINT
from schemas.common import ProbeVerdict
from tests.app.ui.pages import assert_clean, open_app_page
from tests.ingest.duckdb.test_older_file_times import STORED, make_file
from tests.ingest.duckdb.test_older_probe_layout import make_first_layout, results

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


@pytest.mark.parametrize("which", range(len(STORED)), ids=list(STORED))
def test_the_trace_view_opens_a_trace_stored_outside_the_range_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: int) -> None:
    old = make_file(tmp_path / "old.duckdb")
    trace = old.traces[which]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROUTELENS_CONFIG", raising=False)
    monkeypatch.setenv(DB_ENV, str(old.path))
    at = AppTest.from_file(str(ENTRYPOINT), default_timeout=30)
    at.run()  # the root first, then the drill-down at /trace?request_id=, as a link opens it
    at.query_params["request_id"] = trace.request_id
    at.switch_page("views/trace_explorer.py").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    cells = [str(v) for table in at.dataframe for v in table.value.to_numpy().ravel()]
    shown = [c for c in cells if c.startswith(trace.ts.isoformat())]
    assert shown and all("(out of range: stored at this time or" in c for c in shown), shown


def test_the_probes_page_reads_the_first_probe_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "first.duckdb"
    probes = results(datetime.now(UTC) - timedelta(minutes=5), 4)  # inside the grid's lookback
    make_first_layout(path, probes)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROUTELENS_CONFIG", raising=False)
    at = open_app_page("views/probes.py", monkeypatch, {DB_ENV: str(path)})
    assert not at.error, [e.value for e in at.error]
    assert_clean(at, charts_have_data=False)
    grid = at.dataframe[0].value
    judged = grid[grid["verdict"] != "no data"]
    assert set(zip(judged["instance"], judged["kind"], strict=True)) == {(p.instance, p.kind.value) for p in probes}
    assert ProbeVerdict.FAILED.value in set(judged["verdict"])  # inst-0's syntax run: ok false
