"""Every page of the demo's app in a real browser (Debian's Chromium through playwright).

``routelens demo`` runs as it ships (a simulated fleet, the gateway with its prober, traffic, the
app); each page is opened, its key element asserted, and a screenshot of it saved under the test's
``tmp_path`` (:func:`tests.e2e.test_app_browser.check_page`); a page fails on a traceback, raw
``None``/``nan`` text, or an empty chart (the store has traffic).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.demo_run import start_demo
from tests.e2e.net import call
from tests.e2e.test_app_browser import CHROMIUM, CHROMIUM_ARGS, UI_TIMEOUT_MS, check_page
from tests.polling import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} missing: apt-get install -y chromium"),
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("demo-app")
    run = start_demo(tmp, "--rps", "5")
    proc = run.proc
    try:
        assert run.request_id and run.app, run.output
        gateway = run.gateway
        # Enough stored traffic for the pictures: a few dozen traces in the store.
        assert wait_until(lambda: len(call("GET", f"{gateway}/v1/traces?limit=50")[1]["items"]) >= 30, 60)
        yield {"app": run.app, "gateway": gateway, "request_id": run.request_id, "instances": list(run.instances)}
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing: pip install playwright")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def open_page(browser: Any, url: str) -> Any:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1600, "height": 2400})
    page.goto(url)
    expect(page.get_by_test_id("stApp")).to_be_visible(timeout=UI_TIMEOUT_MS)
    return page


PLOT = ".js-plotly-plot"
# page -> the element that is its picture (a CSS selector in the rendered page)
KEY = {"overview": PLOT, "fleet": PLOT, "topology": f"{PLOT} g.sankey", "constraints": PLOT,
       "decisions": "[data-testid='stDataFrame']", "experiments": PLOT, "probes": PLOT}


@pytest.mark.parametrize("name", list(KEY))
def test_every_page_renders_its_picture(demo: dict[str, Any], browser: Any, name: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, f"{demo['app']}/{name}")
    try:
        expect(page.locator(KEY[name]).first).to_be_visible(timeout=UI_TIMEOUT_MS)
        check_page(page, tmp_path / f"page-{name}.png")
        if name == "fleet":  # one tile per instance of the fleet, each as value / limit
            grid = page.locator(PLOT).first
            for instance in demo["instances"]:
                expect(grid).to_contain_text(instance, timeout=UI_TIMEOUT_MS)
            expect(grid).to_contain_text(" / ")
        if name == "topology":  # counts on the nodes
            expect(page.locator(f"{PLOT} g.sankey .node-label").first).to_contain_text(" · ")
    finally:
        page.close()


def test_the_root_opens_the_overview(demo: dict[str, Any], browser: Any) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, f"{demo['app']}/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=UI_TIMEOUT_MS)
    assert page.url.rstrip("/").endswith("/overview")
    page.close()


def test_the_drill_down_shows_the_waterfall(demo: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, f"{demo['app']}/trace?request_id={demo['request_id']}")
    try:
        expect(page.locator(f"{PLOT} .waterfall, {PLOT} .bars").first).to_be_attached(timeout=UI_TIMEOUT_MS)
        check_page(page, tmp_path / "page-trace.png")
    finally:
        page.close()
