"""The trace explorer in a real browser: `streamlit run` subprocess + Debian Chromium via playwright.

Needs ``apt-get install chromium`` and ``pip install playwright`` (the wheel ships its driver;
``playwright install`` is never run: the system Chromium is used through ``executable_path``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def app_url(tmp_path: Path) -> Iterator[str]:
    """Run the stub read API and `streamlit run app/ui/streamlit_app.py` against it; yield the app URL."""
    port = free_port()
    log = tmp_path / "streamlit.log"
    with stub.StubTraceApi([stub.sample_trace()]) as api, log.open("wb") as out:
        env = {k: v for k, v in os.environ.items() if k != "ROUTELENS_DB"}
        env["ROUTELENS_API_URL"] = api.url
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
            expect(sentence).to_contain_text(f"{stub.REJECTED_INSTANCE} was ruled out by kv-cache 0.97 > 0.9")
            expect(page.get_by_text(re.compile("smallest single change"))).to_be_visible()

            for name in ("Elimination", "Scores", "Why not the others", "State snapshot", "Attempts", "Policy"):
                expect(page.get_by_role("heading", name=name)).to_be_visible()
            expect(page.get_by_test_id("stPlotlyChart")).to_have_count(3, timeout=UI_TIMEOUT_MS)  # 3 figures
            expect(page.locator(".waterfalllayer .point")).to_have_count(4, timeout=UI_TIMEOUT_MS)  # 4 stages
            expect(page.get_by_test_id("stDataFrame").first).to_be_visible()
            losers = page.get_by_test_id("stDataFrame").nth(3)  # rejected, ranking, terms (folded), why not
            expect(losers).to_contain_text("picked first, but its attempt failed", timeout=UI_TIMEOUT_MS)
            expect(page.get_by_test_id("stException")).to_have_count(0)
            expect(page.get_by_text("Page not found")).to_have_count(0)
            assert page.get_by_label("request_id").input_value() == stub.SAMPLE_REQUEST_ID

            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()

    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_decisions_and_diff_in_chromium(app_url: str, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing: pip install playwright")
    expect = sync_api.expect
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 2200})
            page.goto(f"{app_url}/decisions?rule=code")
            expect(page.get_by_role("heading", name="Decisions")).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(page.get_by_label("rule")).to_have_value("code")
            expect(page.get_by_text("No decisions match.")).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(page.get_by_test_id("stException")).to_have_count(0)
            page.screenshot(path=str(tmp_path / "decisions.png"), full_page=True)

            page.goto(f"{app_url}/diff?a={stub.SAMPLE_REQUEST_ID}&b={stub.SAMPLE_REQUEST_ID}")
            expect(page.get_by_text("0 of 3 candidates differ.")).to_be_visible(timeout=UI_TIMEOUT_MS)
            expect(page.get_by_text(f"A and B chose the same instance, {stub.SELECTED_INSTANCE}.")).to_be_visible()
            expect(page.get_by_test_id("stDataFrame")).to_have_count(3, timeout=UI_TIMEOUT_MS)
            expect(page.get_by_test_id("stException")).to_have_count(0)
            page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "diff.png").stat().st_size > 10_000
