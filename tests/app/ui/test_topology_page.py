"""The "Traffic topology" page, run by AppTest over a seeded DuckDB store (file, and served by the stub API)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app.reader import DB_ENV
from ingest import DuckDBTraceStore
from tests.app import stub_trace_api as stub
from tests.app.ui import routing_seed as seed
from tests.app.ui.pages import assert_clean, open_app_page

PAGE = "views/topology.py"
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return seed.seeded_file(tmp_path / "traces.duckdb")


@pytest.fixture
def served(db: Path) -> Iterator[stub.StubTraceApi]:
    store = DuckDBTraceStore(db, read_only=True)
    try:
        with stub.StubTraceApi([], store=store) as api:
            yield api
    finally:
        store.close()


def open_page(monkeypatch: pytest.MonkeyPatch, *, db: Path | None = None, api: str | None = None,
              **params: str) -> AppTest:
    env = ({DB_ENV: str(db)} if db is not None else {}) | ({"ROUTELENS_API_URL": api} if api is not None else {})
    return open_app_page(PAGE, monkeypatch, env, **{"end": seed.AT_PARAM, **params})


def sankeys(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(c.proto.spec)["data"][0] for c in at.get("plotly_chart")]


def name(label: str) -> str:
    """A node's name from its label (``code · 4`` -> ``code``)."""
    return label.rsplit(" · ", 1)[0]


def flows(sankey: dict[str, Any], flow: str | None = None) -> dict[tuple[str, str], float]:
    """(source name, target name) -> value of the links of one flow (None: summed over flows)."""
    labels, link, out = [name(x) for x in sankey["node"]["label"]], sankey["link"], {}
    for s, t, v, f in zip(link["source"], link["target"], link["value"], link["label"], strict=True):
        if flow in (None, f):
            out[(labels[s], labels[t])] = out.get((labels[s], labels[t]), 0) + v
    return out


def test_sankey_of_the_window_from_a_file(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    at = open_page(monkeypatch, db=db)

    assert not at.error and not at.warning
    assert_clean(at)
    (sankey,) = sankeys(at)
    assert flows(sankey, "fallback") == {("code", "coder"): 1, ("coder", "c-b"): 1}
    assert flows(sankey, "served") == {("code", "coder"): 3, ("coder", "c-a"): 3,
                                       ("chat", "llama"): 2, ("llama", "l-a"): 2}
    assert flows(sankey, "rejected") == {("✕ error-rate", "l-hot"): 2, ("✕ kv-cache", "c-hot"): 4}
    # The fallback (c-b) is its own amber link; the code → coder link is split into 3 served + 1 fallback.
    colours = dict(zip(sankey["link"]["label"], sankey["link"]["color"], strict=True))
    assert set(colours) == {"served", "fallback", "rejected"} and colours["fallback"] != colours["served"]
    assert "6 requests, 1 with a fallback (amber); 6 candidate removals (red)" in [c.value for c in at.caption]
    assert "code → coder: 3 requests<br>50.0% of all · 75.0% of code" in sankey["link"]["customdata"]
    # Counts on the nodes, and on the flows wide enough to hold one; labels dark on a white ground.
    assert {"code · 4", "coder · 4", "c-a · 3", "✕ kv-cache · 4 removed"} <= set(sankey["node"]["label"])
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {"3", "4"} <= {a["text"] for a in spec["layout"]["annotations"]}
    assert sankey["textfont"]["color"] == "#1a1a1a" and spec["layout"]["paper_bgcolor"] == "#ffffff"


def test_a_sidebar_filter_changes_the_numbers(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    at = open_page(monkeypatch, db=db)
    at.text_input(key="sb_model").set_value("llama").run()
    assert not at.exception
    assert flows(sankeys(at)[0]) == {("chat", "llama"): 2, ("llama", "l-a"): 2, ("✕ error-rate", "l-hot"): 2}
    assert at.query_params["model"] == "llama"

    at.selectbox(key="sb_window").set_value("6h").run()  # the chat request 3 h ago joins
    assert flows(sankeys(at)[0])[("chat", "llama")] == 3


def test_node_links_to_its_decisions(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    at = open_page(monkeypatch, db=db, window="6h")
    at.selectbox(key="node_main").set_value("instance: c-b").run()

    links = [m.value for m in at.markdown if "Decisions behind" in str(m.value)]
    assert links == ["[Decisions behind instance `c-b` ›](/decisions?window=6h&end="
                     + seed.AT_PARAM.replace(":", "%3A").replace("+", "%2B") + "&instance=c-b)"]
    table = at.dataframe[0].value
    assert table.set_index("instance").loc["c-b", "fallbacks"] == 1
    assert table["decisions"].str.startswith("/decisions?").all()


def test_deep_link_restores_compare_and_hides_rejected(
    monkeypatch: pytest.MonkeyPatch, served: stub.StubTraceApi
) -> None:
    at = open_page(monkeypatch, api=served.url, compare="arm", cmp_a="A", cmp_b="B", rejected="0")

    assert at.radio(key="compare").value == "arm" and not at.toggle(key="rejected").value
    assert at.text_input(key="cmp_a").value == "A" and at.text_input(key="cmp_b").value == "B"
    a, b = sankeys(at)
    assert flows(a) == {("code", "coder"): 4, ("coder", "c-a"): 3, ("coder", "c-b"): 1}
    assert flows(b) == {("chat", "llama"): 2, ("llama", "l-a"): 2}
    assert any("experiment_arm=A" in p for p in served.requests if p.startswith("/v1/analytics/traffic"))
    assert not any(p.startswith("/v1/analytics/constraints") for p in served.requests)

    at.toggle(key="rejected").set_value(True).run()
    assert "rejected" not in at.query_params
    assert ("✕ kv-cache", "c-hot") in flows(sankeys(at)[0])


def test_empty_store_says_how_to_send_traffic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = open_page(monkeypatch, db=seed.seeded_file(tmp_path / "empty.duckdb", empty=True))

    assert not at.error and not at.get("plotly_chart")
    assert any("routelens demo" in i.value for i in at.info)


def test_unreachable_store_is_a_banner(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    at = open_page(monkeypatch, api=closed_port_url)

    assert len(at.error) == 1 and "Trace store unreachable" in at.error[0].value
    assert closed_port_url in at.error[0].value


@pytest.mark.parametrize("end", ["2026-11-01T18:00:00 08:00", "2026-11-01T10:00:00"],
                         ids=["plus-decoded-as-space", "no-zone"])
def test_an_end_pin_with_its_plus_decoded_or_without_a_zone_pins_the_window(monkeypatch: pytest.MonkeyPatch,
                                                                            db: Path, end: str) -> None:
    """Before, both were dropped without a word: the page showed the window ending now (empty here)."""
    at = open_page(monkeypatch, db=db, end=end)
    assert f"Window pinned to end at {end.replace(' ', '+')}{'' if ' ' in end else '+00:00'} (`?end=`); " \
           "not refreshing." in [c.value for c in at.caption]
    (sankey,) = sankeys(at)
    assert flows(sankey) == flows(sankeys(open_page(monkeypatch, db=db))[0])
