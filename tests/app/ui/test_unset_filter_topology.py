"""Topology's "(no rule)", "(no model)" and "(not routed)" link to exactly their decisions.

A blank node's link (and a flow row's with a blank field) carried no filter for "this field is
empty": "(no model)" opened every decision of the scope, and the flow code → (no model) every
decision of rule code. Each link is opened on the Decisions page (both pages run by AppTest over
one seeded DuckDB file), which must list as many decisions as the link counts and name the filter.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.reader import DB_ENV
from app.ui.data import decisions as dec
from app.ui.data import topology as tp
from ingest import DuckDBTraceStore
from schemas import DecisionTrace
from tests.app.ui import routing_seed as seed
from tests.app.ui.pages import assert_clean, open_app_page
from tests.factories import make_trace

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def _blank(i: int, rule: str | None, model: str | None, instance: str | None) -> DecisionTrace:
    return make_trace(f"req-{i:03d}", ts=seed.ago(30 + i), rule=rule, selected_model=model,
                      selected_instance=instance)


BLANKS = [_blank(20, None, "coder", "c-a"), _blank(21, None, "coder", "c-a"),
          *(_blank(22 + k, "code", None, None) for k in range(3)), _blank(25, None, None, None),
          _blank(26, "chat", "llama", None)]
# What the seed (seed.traces(): 6 routed requests in the last hour) and BLANKS put behind each blank node.
NODE_COUNTS = {"rule: (no rule)": 3, "model: (no model)": 4, "instance: (not routed)": 5}


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_streamlit_caches: None) -> Path:
    path = tmp_path / "traces.duckdb"
    store = DuckDBTraceStore(path)
    try:
        assert store.write_records([*seed.traces(), *BLANKS]).rejected == []
    finally:
        store.close()
    monkeypatch.setenv(DB_ENV, str(path))
    monkeypatch.delenv("ROUTELENS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return path


def topology(**params: str) -> AppTest:
    return open_app_page("views/topology.py", **{"end": seed.AT_PARAM, **params})


def decisions_of(link: str) -> AppTest:
    """The Decisions page opened by a link (``/decisions?...``), as a browser opens it."""
    parts = urllib.parse.urlsplit(link)
    assert parts.path == "/decisions"
    return open_app_page("views/decisions.py", **dict(urllib.parse.parse_qsl(parts.query)))


def listed(at: AppTest) -> list[str]:
    assert not at.warning and not at.error, [w.value for w in (*at.warning, *at.error)]
    return at.dataframe[0].value["request_id"].tolist() if at.dataframe else []


def node_count(at: AppTest, name: str) -> int:
    """The count the Sankey's label of node ``name`` shows (``(no model) · 4``)."""
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    (label,) = [x for x in spec["node"]["label"] if x.rsplit(" · ", 1)[0] == name]
    return int(label.rsplit(" · ", 1)[1])


@pytest.mark.usefixtures("db")
@pytest.mark.parametrize("node", list(NODE_COUNTS))
def test_a_blank_node_opens_exactly_its_decisions(node: str) -> None:
    at = topology()
    assert_clean(at)
    assert node in at.selectbox(key="node_main").options and node_count(at, node.split(": ")[1]) == NODE_COUNTS[node]
    at.selectbox(key="node_main").set_value(node).run()
    (link,) = [str(m.value) for m in at.markdown if "Decisions behind" in str(m.value)]
    target = link[link.index("(/decisions") + 1:-1]
    field = node.split(":")[0]
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)["unset"] == [field]

    page = decisions_of(target)
    shown = listed(page)
    assert len(shown) == NODE_COUNTS[node]
    assert page.multiselect(key="dec_unset").value == [field]  # the filter is on the page, named
    says = {"rule": "without a rule", "model": "without a model", "instance": "not routed to an instance"}[field]
    assert any(c.value.startswith(f"Page 1: {len(shown)} decisions {says}.") for c in page.caption)
    assert_clean(page)


@pytest.mark.usefixtures("db")
def test_each_flow_row_opens_exactly_its_decisions() -> None:
    at = topology()
    table = at.dataframe[0].value
    blank = table[(table[["rule", "model", "instance"]] == [tp.NO_RULE, tp.NO_MODEL, tp.NO_INSTANCE]).any(axis=1)]
    assert sorted(blank["requests"]) == [1, 1, 2, 3]
    for row in blank.itertuples():
        shown = listed(decisions_of(str(row.decisions)))
        assert len(shown) == row.requests, row


@pytest.mark.usefixtures("db")
def test_clearing_the_choice_lists_every_decision_again() -> None:
    page = decisions_of("/decisions?end=" + urllib.parse.quote(seed.AT_PARAM) + "&unset=model,instance")
    assert len(listed(page)) == 4 and page.query_params["unset"] == "model,instance"
    page.multiselect(key="dec_unset").set_value([]).run()
    assert len(listed(page)) == len(seed.traces()) - 1 + len(BLANKS)  # one seeded trace is 3 h old
    assert "unset" not in page.query_params


@pytest.mark.usefixtures("db")
def test_a_link_s_bad_names_and_a_clash_with_the_sidebar_are_said() -> None:
    page = decisions_of("/decisions?end=" + urllib.parse.quote(seed.AT_PARAM) + "&unset=colour,model")
    assert [w.value for w in page.warning][0].startswith("Ignored unset=")
    assert page.multiselect(key="dec_unset").value == ["model"]
    clash = decisions_of("/decisions?end=" + urllib.parse.quote(seed.AT_PARAM) + "&unset=model&model=coder")
    assert any("(no model) is chosen and the sidebar names model 'coder'" in w.value for w in clash.warning)
    assert not clash.exception


def test_links_of_blank_fields_replace_the_scope_s_value() -> None:
    base = {"window": "6h", "model": "coder", "instance": None}
    assert tp.decisions_link(base, unset=["model"]) == "/decisions?window=6h&unset=model"
    assert tp.decisions_link(base, unset=["instance", "rule"], model="llama") == \
        "/decisions?window=6h&model=llama&unset=rule%2Cinstance"
    params, problems = dec.parse_search({"unset": "instance, rule", "rule": ""})
    assert problems == [] and params is not None and params.unset == ["rule", "instance"]
    assert dec.to_query(params) == {"unset": "rule,instance"}
    assert dec.parse_search({"unset": "rule", "rule": "code"})[1] == ["rule: a rule is given and (no rule) chosen "
                                                                     "too; clear one"]
    assert dec.parse_search({"unset": "nothing"})[1] == ["empty: choose one of the offered values (rule, model, "
                                                         "instance)"]
