"""Three pages read at a 1400 px window in Debian's Chromium (an audit found each cut or covered there).

- "Why this model": the headline tiles were cut (``ok · HTT…``): each value fits its tile.
- "Decision diff": ``why_b`` was off screen: the grid fits without scrolling sideways, the reasons
  wrap in a table of their own, whole.
- "Probes & alerts": the verdict grid's column labels (``syntax``, ``semantic``) were drawn under
  its title: each label's box clears the title's.

The harness (``streamlit run`` against the stub read API, Chromium through playwright) is the one of
:mod:`tests.e2e.test_app_browser`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from schemas import OutcomeStatus
from tests.app import stub_trace_api as stub
from tests.app.ui.data import audit_cases
from tests.e2e.test_app_browser import CHROMIUM, CHROMIUM_ARGS, UI_TIMEOUT_MS, settle, streamlit_app

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} missing: apt-get install -y chromium"),
]

WIDTH = 1400
SLOW_ERROR_ID = "req-slow-502"
# Each element inside a metric's value that is narrower than its text (CSS cuts it with an ellipsis).
CUT_TILES_JS = ("() => Array.from(document.querySelectorAll('[data-testid=stMetricValue]')).filter(m =>"
                " [m, ...m.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1)).map(m => m.innerText)")
GRID_JS = ("() => { const t = document.querySelector('[data-testid=stDataFrame]');"
           " const s = t.querySelector('.dvn-scroller');"
           " return [s.scrollWidth, s.clientWidth, t.getBoundingClientRect().right, window.innerWidth]; }")
TABLE_JS = ("() => { const t = document.querySelector('[data-testid=stTable]');"
            " return [t.scrollWidth, t.clientWidth, t.getBoundingClientRect().right, window.innerWidth]; }")
# The verdict grid (the page's first figure): its title's box and each column label's.
GRID_BOXES_JS = ("() => { const g = document.querySelector('.js-plotly-plot');"
                 " const box = e => { const r = e.getBoundingClientRect();"
                 " return [r.left, r.top, r.right, r.bottom, e.textContent]; };"
                 " return [box(g.querySelector('.gtitle')), box(g), Array.from(g.querySelectorAll('.xtick text'))"
                 ".map(box)]; }")
LONGEST_REASON = ("left out by rule legal's target deepseek-v4-32k: coder-6b is on its chain, tried only after "
                  "deepseek-v4-32k")


def slow_error() -> Any:
    """The sample decision, answered with a 502 after 66 s (the longest tile values the page writes)."""
    trace = stub.sample_trace()
    out = trace.outcome.model_copy(update={"status": OutcomeStatus.ERROR, "http_status": 502,
                                           "total_ms": 66_012.3})
    return trace.model_copy(update={"request_id": SLOW_ERROR_ID, "outcome": out, "latency_ms": 12_345.6})


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("pages-1400")
    now = datetime.now(UTC)
    traces = [stub.sample_trace(), audit_cases.rule_with_chain(), slow_error()]
    with stub.StubTraceApi(traces, probes=stub.sample_probe_results(now), events=stub.sample_events(now),
                           alerts=stub.sample_alerts(now), router_state=stub.sample_router_state(now)) as api:
        with streamlit_app(tmp, {"ROUTELENS_API_URL": api.url}) as url:
            yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing: pip install playwright")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def opened(browser: Any, url: str, ready: str, drawn: str) -> Any:
    """A 1400 px page at ``url`` once ``ready`` shows, the run has ended and ``drawn`` (CSS) is there."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": WIDTH, "height": 1400})
    page.goto(url)
    expect(page.get_by_text(ready).first).to_be_visible(timeout=UI_TIMEOUT_MS)
    settle(page)
    page.wait_for_selector(drawn, state="attached", timeout=UI_TIMEOUT_MS)
    page.evaluate("() => document.fonts.ready.then(() => true)")  # widths are measured in the page's own type
    return page


@pytest.mark.parametrize("request_id", [stub.SAMPLE_REQUEST_ID, SLOW_ERROR_ID])
def test_the_trace_page_s_tiles_are_whole(app_url: str, browser: Any, request_id: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = opened(browser, f"{app_url}/trace?request_id={request_id}", "Total time", "[data-testid=stMetricValue]")
    try:
        expect(page.get_by_test_id("stMetricValue")).to_have_count(5, timeout=UI_TIMEOUT_MS)
        page.screenshot(path=str(tmp_path / "trace.png"))
        values = page.get_by_test_id("stMetricValue").all_inner_texts()
        assert len(values) == 5 and page.evaluate(CUT_TILES_JS) == [], values
    finally:
        page.close()


def test_the_diff_grid_fits_and_its_reasons_are_whole(app_url: str, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = opened(browser, f"{app_url}/diff?a={stub.SAMPLE_REQUEST_ID}&b=req-legal", "of 7 candidates differ.",
                  "[data-testid=stDataFrame] .dvn-scroller")
    try:
        page.screenshot(path=str(tmp_path / "diff.png"))
        scroll_width, shown_width, right, window = page.evaluate(GRID_JS)
        assert scroll_width <= shown_width + 1, f"the grid scrolls sideways: {scroll_width} px in {shown_width} px"
        assert right <= window, (right, window)
        page.wait_for_selector("[data-testid=stTable] table", state="attached", timeout=UI_TIMEOUT_MS)
        scroll_width, shown_width, right, window = page.evaluate(TABLE_JS)
        assert scroll_width <= shown_width + 1 and right <= window, (scroll_width, shown_width, right, window)
        reasons = page.get_by_test_id("stTable")
        expect(reasons).to_contain_text("why not chosen in B")
        expect(reasons).to_contain_text(LONGEST_REASON)  # whole, wrapped
    finally:
        page.close()


def test_the_probe_grid_s_column_labels_clear_its_title(app_url: str, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = opened(browser, f"{app_url}/probes", "Verdict per probe", ".js-plotly-plot .gtitle")
    expect(page.locator(".js-plotly-plot").first.locator(".xtick text")).to_have_count(3, timeout=UI_TIMEOUT_MS)
    try:
        page.screenshot(path=str(tmp_path / "probes.png"))
        title, figure, labels = page.evaluate(GRID_BOXES_JS)
        assert sorted(label[4] for label in labels) == ["latency", "semantic", "syntax"]
        for left, top, right, bottom, text in labels:
            overlaps = left < title[2] and right > title[0] and top < title[3] and bottom > title[1]
            assert not overlaps, f"{text!r} at {(left, top, right, bottom)} under the title at {title[:4]}"
            assert top >= figure[1], f"{text!r} above the figure"
    finally:
        page.close()
