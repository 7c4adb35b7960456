"""The Decision diff page: two requests side by side, or one replayed under another policy (stub read API)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app import stub_trace_api as stub
from tests.app.ui.data.test_diff import CHEAP_FIRST, config_with_policies
from tests.app.ui.pages import assert_clean, open_app_page
from tests.router_core.conftest import decide, healthy, make_config

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, clean_streamlit_caches: None) -> Iterator[stub.StubTraceApi]:
    _, one = decide(healthy(), request_id="r1")
    _, two = decide(healthy(), make_config(**CHEAP_FIRST), request_id="r2")
    with stub.StubTraceApi([one, two]) as server:
        monkeypatch.setenv("ROUTELENS_API_URL", server.url)
        yield server


def open_diff(**params: str) -> AppTest:
    return open_app_page("views/diff.py", **params)


def test_two_requests_side_by_side(api: stub.StubTraceApi) -> None:
    at = open_diff(a="r1", b="r2")
    assert not at.warning and not at.error
    assert_clean(at)
    assert at.text_input(key="a").value == "r1" and at.text_input(key="b").value == "r2"
    assert [s.value for s in at.subheader] == ["Candidates", "Score terms", "Facts"]
    cands, terms, facts = (d.value for d in at.dataframe)
    by = cands.set_index("instance")
    assert by.loc["small-a", "verdict_b"] == "selected" and by.loc["small-a", "differs"]
    assert terms["differs"].any()
    f = facts.set_index("field")
    assert f.loc["request_id", "a"] == "r1" and f.loc["request_id", "b"] == "r2"
    assert f.loc["policy_hash", "differs"]
    assert len(at.text) == 3 and len(at.get("plotly_chart")) == 2
    for table in (cands, terms, facts):  # rounded, no None or nan in any cell
        shown = table.astype(str)
        assert not shown.isin(["None", "nan", "<NA>"]).any().any()
        assert not shown.apply(lambda c: c.str.fullmatch(r"-?\d+\.\d{4,}")).any().any()
    assert at.text[0].value.startswith("A chose big-b, B chose small-a: another policy (")  # the verdict opens it
    assert "a score term: in B, big-b: outscored by small-a on cost" in at.text[0].value  # B weighs cost alone


def test_same_request_twice_differs_nowhere(api: stub.StubTraceApi) -> None:
    at = open_diff(a="r1", b="r1")
    assert at.text[0].value == "A and B chose the same instance, big-b."
    assert not at.dataframe[0].value["differs"].any()
    assert at.caption[-1].value.startswith("0 of")


def test_replay_under_a_policy_file(api: stub.StubTraceApi, tmp_path: Path) -> None:
    policy = tmp_path / "cheap.yaml"
    policy.write_text(json.dumps(CHEAP_FIRST), encoding="utf-8")
    at = open_diff(a="r1", policy=str(policy))
    assert at.radio(key="diff_mode").value == "another policy"
    assert not at.warning, [w.value for w in at.warning]
    by = at.dataframe[0].value.set_index("instance")
    assert by.loc["small-a", "verdict_b"] == "selected"
    assert at.query_params["policy"] == str(policy)


def test_a_routing_policy_relative_to_the_configuration(api: stub.StubTraceApi, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``?policy=policies/seed000.yaml``-style: a routing policy, named relative to the app's configuration."""
    config = config_with_policies(tmp_path / "conf")
    monkeypatch.setenv("ROUTELENS_CONFIG", str(config))
    at = open_diff(a="r1", policy="policies/cheap.yaml")
    assert not at.warning, [w.value for w in at.warning]
    assert at.dataframe[0].value.set_index("instance").loc["small-a", "verdict_b"] == "selected"
    at = open_diff(a="r1", policy="policies/rules.yaml")
    assert not at.warning, [w.value for w in at.warning]
    assert len(at.dataframe) == 3


def test_a_bad_policy_file_gives_a_message(api: stub.StubTraceApi, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("fleet: [unclosed\n", encoding="utf-8")
    at = open_diff(a="r1", policy=str(bad))
    assert "That policy is not valid" in at.warning[0].value and not at.dataframe
    at = open_diff(a="r1", policy="/etc/passwd")
    assert "a policy file ends in" in at.warning[0].value


def test_switching_the_mode_to_a_typed_request(api: stub.StubTraceApi) -> None:
    at = open_diff(a="r1")
    assert [i.value for i in at.info] == ["Enter request B's request_id."]
    at.text_input(key="b").set_value("r2").run()
    assert at.query_params["b"] == "r2" and len(at.dataframe) == 3


@pytest.mark.parametrize("hostile", ["' OR 1=1 --", "../v1/alerts", "请求🚀"])
def test_unknown_or_hostile_ids(api: stub.StubTraceApi, hostile: str) -> None:
    at = open_diff(a="r1", b=hostile)
    assert at.warning[0].value == "No trace found for request B's request_id."
    assert at.code[0].value == hostile and not at.dataframe and not at.error
    at = open_diff(a="z" * 10_000, b="r1")
    assert "Request A: A request_id has at most 128 characters" in at.warning[0].value


def test_unreachable(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    monkeypatch.setenv("ROUTELENS_API_URL", closed_port_url)
    at = open_diff(a="r1", b="r2")
    assert "Trace source unreachable" in at.error[0].value
