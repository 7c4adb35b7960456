"""The Decisions table fits the window at 1280 px and wider: no sideways scrolling (Debian's Chromium).

Rows as wide as the demo's: gateway-length request ids, the longest model and instance names of
the shipped fleet, an arm, a long rule, fallbacks, errors and two broken constraints. The harness
(``streamlit run`` against a DuckDB file, Chromium through playwright) is the one of
:mod:`tests.e2e.test_app_browser`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.e2e.test_app_browser import CHROMIUM, CHROMIUM_ARGS, UI_TIMEOUT_MS, settle, streamlit_app

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} missing: apt-get install -y chromium"),
]

N = 12
# The data grid's scroll area and the table's box: [scrollWidth, clientWidth, right edge, window width].
SIZES_JS = ("() => { const t = document.querySelector('[data-testid=stDataFrame]');"
            " const s = t.querySelector('.dvn-scroller');"
            " return [s.scrollWidth, s.clientWidth, t.getBoundingClientRect().right, window.innerWidth]; }")


def wide_traces() -> list[object]:
    """Decisions of the last minutes whose every column is as wide as the demo's widest."""
    from schemas import Outcome, OutcomeStatus
    from schemas.trace import Violation
    from tests.factories import make_trace

    now = datetime.now(UTC)
    out = []
    for i in range(N):
        base = make_trace()
        cand = base.candidates[0]
        probe = Violation(constraint="probe-semantic", metric="probe_ok", op="==", value=0.0, threshold=1.0,
                          reason="semantic probe failed")
        broken = cand.model_copy(update={"violations": [*cand.violations, probe]})
        error = i % 4 == 0
        out.append(make_trace(
            f"req_{i:020x}", ts=now - timedelta(minutes=i + 1), rule="long_context_priority",
            selected_model="deepseek-coder-6b-fp16", selected_instance="coder-6b-a", experiment_arm="seed-score",
            fallback_triggered=i % 3 == 0, fallback_reason="coder-6b-b timed out" if i % 3 == 0 else None,
            candidates=[broken, *base.candidates[1:]],
            outcome=Outcome(status=OutcomeStatus.ERROR if error else OutcomeStatus.OK,
                            http_status=503 if error else 200, total_ms=12_345.6 + i, cost=1234.567)))
    return out


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from ingest import DuckDBTraceStore

    tmp = tmp_path_factory.mktemp("decisions-width")
    store = DuckDBTraceStore(tmp / "traces.duckdb")
    try:
        store.write_records(wide_traces())  # type: ignore[arg-type]
    finally:
        store.close()
    with streamlit_app(tmp, {"ROUTELENS_DB": str(tmp / "traces.duckdb")}) as url:
        yield url


@pytest.mark.parametrize("width", [1280, 1440, 1600])
def test_the_default_columns_fit_without_scrolling_sideways(app_url: str, width: int, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing: pip install playwright")
    expect = sync_api.expect
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 1000})
            page.goto(f"{app_url}/decisions")
            expect(page.get_by_text(f"Page 1: {N} decisions.")).to_be_visible(timeout=UI_TIMEOUT_MS)
            settle(page)
            table = page.get_by_test_id("stDataFrame").first
            expect(table).to_be_visible(timeout=UI_TIMEOUT_MS)
            page.screenshot(path=str(tmp_path / f"decisions-{width}.png"))
            scroll_width, shown_width, right, window = page.evaluate(SIZES_JS)
            assert scroll_width <= shown_width + 1, f"the table scrolls sideways at {width} px: " \
                                                    f"{scroll_width} px of columns in {shown_width} px"
            assert right <= window, (right, window)
            # The first column is the request id, a link to "Why this model".
            expect(table).to_contain_text("request (why?)")
        finally:
            browser.close()
