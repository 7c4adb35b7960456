"""The trace explorer in a real browser: `streamlit run` subprocess + Debian Chromium via playwright.

Needs ``apt-get install chromium`` and ``pip install playwright`` (the wheel ships its driver;
``playwright install`` is never run: the system Chromium is used through ``executable_path``).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.run.procs import free_port, wait_http
from app.ui import ENTRYPOINT
from tests.app import stub_trace_api as stub
from tests.e2e.conftest import ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STARTUP_TIMEOUT_S = 60.0
UI_TIMEOUT_MS = 30_000
# Words a page must never show an operator: a missing value printed raw, a float that is not a number.
RAW = re.compile(r"\b(None|nan|NaN|null|undefined)\b")
# Each plotly figure on the page and how many traces it draws (plotly keeps them on the element as .data).
PLOT_TRACES_JS = "() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(g => (g.data || []).length)"


def settle(page: Any) -> None:
    """Wait until Streamlit has finished its run (its status widget gone) and plotly has drawn every figure."""
    from playwright.sync_api import expect

    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=UI_TIMEOUT_MS)
    page.wait_for_function("() => Array.from(document.querySelectorAll('[data-testid=stPlotlyChart]'))"
                           ".every(c => c.querySelector('.js-plotly-plot .main-svg'))", timeout=UI_TIMEOUT_MS)


def check_page(page: Any, shot: Path, *, charts_have_data: bool = True) -> list[int]:
    """Fail on a traceback, an exception box, raw ``None``/``nan`` text or (when the store has data) an
    empty chart; save a full-page screenshot at ``shot`` first, so a failure leaves its picture.

    Returns:
        The number of traces of each figure on the page.
    """
    from playwright.sync_api import expect

    settle(page)
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_text("Page not found")).to_have_count(0)
    text = page.locator("[data-testid=stMain]").inner_text()
    assert "Traceback" not in text, text
    raw = sorted({m.group(0) for m in RAW.finditer(text)})
    assert not raw, f"raw {raw} on the page: {text}"
    traces = list(page.evaluate(PLOT_TRACES_JS))
    if charts_have_data:
        assert all(n > 0 for n in traces), f"an empty chart on a page whose store has data: {traces}"
    return traces

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} missing: apt-get install -y chromium"),
]


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    healthy = wait_http(url, STARTUP_TIMEOUT_S, alive=lambda: proc.poll() is None)
    if proc.poll() is not None:
        pytest.fail(f"streamlit exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
    if not healthy:
        pytest.fail(f"streamlit not healthy after {STARTUP_TIMEOUT_S} s:\n{log.read_text(errors='replace')}")


def recent_traces(n: int = 12) -> list[Any]:
    """Traces of the last minutes (the Decisions page's default window), one in four an error."""
    from datetime import UTC, datetime, timedelta

    from schemas import Outcome, OutcomeStatus
    from tests.factories import make_trace

    now = datetime.now(UTC)
    # Ids as long as the gateway's (req_ and 20 hex digits), so the table is as wide as in production.
    return [make_trace(f"req_{i:020x}", ts=now - timedelta(minutes=i + 1),
                       rule="long_context_priority" if i == 9 else "chat",
                       outcome=Outcome(status=OutcomeStatus.ERROR if i % 4 == 0 else OutcomeStatus.OK,
                                       http_status=500 if i % 4 == 0 else 200, total_ms=120.0 + i))
            for i in range(n)]


@contextlib.contextmanager
def streamlit_app(tmp_path: Path, env_update: dict[str, str]) -> Iterator[str]:
    """Run `streamlit run app/ui/streamlit_app.py` with ``env_update``; yield its URL, stop it after."""
    port = free_port()
    log = tmp_path / "streamlit.log"
    with log.open("wb") as out:
        env = {k: v for k, v in os.environ.items() if k not in ("ROUTELENS_DB", "ROUTELENS_API_URL")} | env_update
        cmd = [
            sys.executable, "-m", "streamlit", "run", str(ENTRYPOINT),
            "--server.headless", "true",
            "--server.port", str(port),
            "--server.address", "127.0.0.1",
            "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_healthy(proc, f"{base}/_stcore/health", log)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def app_url(tmp_path: Path) -> Iterator[str]:
    """Run the stub read API and the app against it; yield the app URL."""
    with stub.StubTraceApi([stub.sample_trace()]) as api:
        with streamlit_app(tmp_path, {"ROUTELENS_API_URL": api.url}) as url:
            yield url


@pytest.fixture
def db_app_url(tmp_path: Path) -> Iterator[str]:
    """The app over a DuckDB file of recent traces (the Decisions page searches it); yield the app URL."""
    from ingest import DuckDBTraceStore

    path = tmp_path / "traces.duckdb"
    store = DuckDBTraceStore(path)
    try:
        store.write_records(recent_traces())
    finally:
        store.close()
    with streamlit_app(tmp_path, {"ROUTELENS_DB": str(path)}) as url:
        yield url


def test_trace_explorer_in_chromium(app_url: str, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing: pip install playwright")
    expect = sync_api.expect
    shot = tmp_path / "trace_explorer.png"

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            # Tall viewport: Streamlit scrolls an inner container, so full_page alone cuts the page.
            page = browser.new_page(viewport={"width": 1600, "height": 2200})
            # The drill-down has its own path; the landing page at the root is the overview.
            page.goto(f"{app_url}/trace?request_id={stub.SAMPLE_REQUEST_ID}")

            sentence = page.get_by_text(re.compile(f"^{stub.SELECTED_INSTANCE} served the request after a fallback"))
            expect(sentence).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(sentence).to_contain_text(f"{stub.REJECTED_INSTANCE} was ruled out by kv-cache 97% > 90%")
            expect(page.get_by_text(re.compile("smallest single change"))).to_be_visible()

            for name in ("Elimination", "Scores", "Why not the others", "State snapshot", "Attempts", "Policy"):
                expect(page.get_by_role("heading", name=name)).to_be_visible()
            expect(page.get_by_test_id("stPlotlyChart")).to_have_count(3, timeout=UI_TIMEOUT_MS)  # 3 figures
            expect(page.locator(".waterfalllayer .point")).to_have_count(4, timeout=UI_TIMEOUT_MS)  # 4 stages
            # Every filter says what it removed and what is left (one that removed nothing is no "0").
            expect(page.locator(".waterfalllayer")).to_contain_text(f"{stub.REJECTED_INSTANCE} · 2 left")
            expect(page.get_by_test_id("stDataFrame").first).to_be_visible()
            losers = page.get_by_test_id("stDataFrame").nth(3)  # rejected, ranking, terms (folded), why not
            expect(losers).to_contain_text("picked first, but its attempt failed", timeout=UI_TIMEOUT_MS)
            expect(page.get_by_test_id("stException")).to_have_count(0)
            expect(page.get_by_text("Page not found")).to_have_count(0)
            assert page.get_by_label("request_id").input_value() == stub.SAMPLE_REQUEST_ID

            figures = check_page(page, shot)
            assert len(figures) == 3 and min(figures) > 0
        finally:
            browser.close()


def test_decisions_and_diff_in_chromium(app_url: str, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing: pip install playwright")
    expect = sync_api.expect
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 2200})
            page.goto(f"{app_url}/decisions?rule=code")
            expect(page.get_by_role("heading", name="Decisions")).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(page.get_by_label("rule", exact=True)).to_have_value("code")
            expect(page.get_by_text("No decisions match.")).to_be_visible(timeout=UI_TIMEOUT_MS)
            check_page(page, tmp_path / "decisions-none.png")

            page.goto(f"{app_url}/diff?a={stub.SAMPLE_REQUEST_ID}&b={stub.SAMPLE_REQUEST_ID}")
            expect(page.get_by_text("0 of 3 candidates differ.")).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(page.get_by_text(f"A and B chose the same instance, {stub.SELECTED_INSTANCE}.")).to_be_visible()
            expect(page.get_by_test_id("stDataFrame")).to_have_count(3, timeout=UI_TIMEOUT_MS)
            check_page(page, tmp_path / "diff.png")
        finally:
            browser.close()


SCROLLER_JS = ("() => { const s = document.querySelector('[data-testid=stDataFrame] .dvn-scroller');"
               " return [s.scrollWidth, s.clientWidth, s.scrollHeight, s.clientHeight]; }")


def test_the_decisions_table_in_chromium(db_app_url: str, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing: pip install playwright")
    expect = sync_api.expect
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1400})
            page.goto(f"{db_app_url}/decisions")
            caption = page.get_by_text("Page 1: 12 decisions. Cost in cost units, latencies in ms.")
            expect(caption).to_be_visible(timeout=UI_TIMEOUT_MS)
            check_page(page, tmp_path / "decisions.png")
            # Full height and every column in view: the table scrolls neither way.
            width, shown_width, height, shown_height = page.evaluate(SCROLLER_JS)
            assert width <= shown_width + 1 and height <= shown_height + 1, (width, shown_width, height, shown_height)
            # The stored hashes are unkeyed and so are typed queries: nothing claims they cannot match.
            expect(page.get_by_text("will not match")).to_have_count(0)
        finally:
            browser.close()
