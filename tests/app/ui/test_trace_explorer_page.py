"""The "Why this model" page, run by AppTest against a real loopback stub of the read API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app.ui import ENTRYPOINT
from ingest.duckdb.store import DuckDBTraceStore
from tests.app import stub_trace_api as stub
from tests.app.ui.data import why_cases as cases

APP = str(ENTRYPOINT)
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def run_app(monkeypatch: pytest.MonkeyPatch, api_url: str, request_id: str | None) -> AppTest:
    monkeypatch.setenv("ROUTELENS_API_URL", api_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()  # the root (which opens the overview) first, then the drill-down at /trace?request_id=
    if request_id is not None:
        at.query_params["request_id"] = request_id
    at.switch_page("views/trace_explorer.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> list[dict[str, object]]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_found_trace_reads_sentence_first_then_pictures(
    monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi
) -> None:
    at = run_app(monkeypatch, stub_api.url, stub.SAMPLE_REQUEST_ID)

    assert at.text_input(key="request_id").value == stub.SAMPLE_REQUEST_ID
    assert not at.error and not at.info
    sentence = at.text[0].value
    assert sentence.startswith(f"{stub.SELECTED_INSTANCE} served the request after a fallback")
    assert f"{stub.REJECTED_INSTANCE} was ruled out by kv-cache 97% > 90% since 12:00:00" in sentence
    assert "Lowering vllm-qwen-a's kv-cache from 0.58 to 0.25" in at.text[1].value
    assert [w.value for w in at.warning] == [f"Fallback: {stub.FALLBACK_REASON}"]
    assert {m.label: m.value for m in at.metric}["Total time"] == "3,890 ms"
    assert [s.value for s in at.subheader] == ["Elimination", "Scores", "Why not the others", "State snapshot",
                                               f"Probes of {stub.SELECTED_INSTANCE} at that moment", "Attempts",
                                               "Policy"]

    waterfall, terms, attempts = charts(at)
    assert waterfall["data"][0]["type"] == "waterfall"
    assert waterfall["data"][0]["x"] == ["all candidates", "filter/kv-cache", "ranked", "selected"]
    assert [b["name"] for b in terms["data"]] == ["queue-depth", "kv-cache", "latency"]
    assert [b["name"] for b in attempts["data"]] == ["timeout", "ok"]

    frames = [df.value for df in at.dataframe]
    rejected, ranking, losers, state = frames[0], frames[1], frames[3], frames[4]
    assert rejected["ruled out by"].tolist() == [f"kv-cache: kv_cache_usage 97% > 90% — {stub.KV_REASON}"]
    assert ranking["verdict"].tolist() == ["feasible", "selected", "ruled out"]
    assert len(ranking.columns) <= 7  # narrow: no sideways scrolling
    assert state.set_index("instance").loc[stub.REJECTED_INSTANCE, "kv_cache_usage"] == "0.970"
    assert ranking.set_index("instance").loc[stub.REJECTED_INSTANCE, "total"] == "—"  # not "None"
    for frame in frames:  # a missing value reads as a dash in every table, never None or nan
        assert not frame.isna().any().any() and "None" not in frame.astype(str).to_numpy()
    assert losers.set_index("instance")["why not"].to_dict() == {
        stub.TOP_RANKED: f"picked first, but its attempt failed (timeout, ReadTimeout); {stub.SELECTED_INSTANCE} "
                         "served",
        stub.REJECTED_INSTANCE: "removed by kv-cache 97% > 90% since 12:00:00"}
    policy = frames[6].set_index("field")["value"]
    assert policy["rule"] == "code-default" and policy["intent"] == "code (82%)"
    assert policy["weights"] == "queue-depth 0.3, kv-cache 0.4, latency 0.3"
    assert policy["policy and pick steps"] == "rule code-default matched · max score, margin 0.132"

    assert at.expander[-1].label == "Mark as misroute: make it a regression case"
    assert at.expander[-2].label == "Raw trace JSON"
    assert at.expander[-2].json[0].value.count(stub.SAMPLE_REQUEST_ID) >= 1
    assert [r for r in stub_api.requests if r.startswith("/v1/traces")] == [f"/v1/traces/{stub.SAMPLE_REQUEST_ID}"]


def test_unknown_model_trace_explains_itself_without_dashes(monkeypatch: pytest.MonkeyPatch) -> None:
    with stub.StubTraceApi([cases.unknown_model()]) as api:
        at = run_app(monkeypatch, api.url, "req-unknown")

    assert at.text[0].value.startswith("No candidate was considered for requested model 'gpt-9'")
    assert not any("— → —" in str(m.value) for m in at.markdown)
    assert "The request was not forwarded." in [t.value for t in at.text]


def test_markdown_in_an_id_is_shown_literally(monkeypatch: pytest.MonkeyPatch) -> None:
    odd = "req_*bold*_[x](y)"
    with stub.StubTraceApi([stub.sample_trace(odd)]) as api:
        at = run_app(monkeypatch, api.url, odd)
    assert not at.warning[1:] and at.text[0].value.startswith(stub.SELECTED_INSTANCE)
    assert all(odd not in str(m.value) for m in at.markdown)  # only the escaped link carries it


def test_unknown_id_warns(monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi) -> None:
    at = run_app(monkeypatch, stub_api.url, "req-nope")

    assert len(at.warning) == 1 and "No trace found for this request_id" in at.warning[0].value
    assert at.code[0].value == "req-nope"
    assert not at.error and not at.dataframe


@pytest.mark.parametrize("hostile", ["' OR 1=1 --", "../../v1/alerts", "请求-ü-🚀", '"; DROP TABLE traces; --'])
def test_hostile_ids_find_nothing(monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi, hostile: str) -> None:
    at = run_app(monkeypatch, stub_api.url, hostile)
    assert "No trace found" in at.warning[0].value and at.code[0].value == hostile
    assert not at.error


def test_a_10kb_id_is_refused_before_any_lookup(monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi) -> None:
    at = run_app(monkeypatch, stub_api.url, "x" * 10_000)
    assert "at most 128 characters" in at.warning[0].value
    assert [r for r in stub_api.requests if r.startswith("/v1/traces")] == []  # no lookup


def test_unreachable_api_errors(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    at = run_app(monkeypatch, closed_port_url, "req-7f3a9c")

    assert len(at.error) == 1
    assert "Trace source unreachable" in at.error[0].value
    assert not at.warning and not at.dataframe


def test_empty_id_asks_for_one_and_fetches_nothing(
    monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi
) -> None:
    at = run_app(monkeypatch, stub_api.url, None)

    assert len(at.info) == 1 and "request_id" in at.info[0].value
    assert [r for r in stub_api.requests if r.startswith("/v1/traces")] == []  # no lookup


def test_typing_an_id_loads_it_and_updates_the_url(
    monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi
) -> None:
    at = run_app(monkeypatch, stub_api.url, None)

    at.text_input(key="request_id").set_value(f"  {stub.SAMPLE_REQUEST_ID} ").run()

    assert not at.exception
    assert at.query_params["request_id"] == stub.SAMPLE_REQUEST_ID
    assert at.text[0].value.startswith(stub.SELECTED_INSTANCE)

    at.text_input(key="request_id").set_value("").run()
    assert "request_id" not in at.query_params


@pytest.mark.parametrize("case", [cases.normal_win, cases.tie_break, cases.no_feasible, cases.fail_open],
                         ids=lambda c: c.__name__)
def test_every_decision_shape_renders(monkeypatch: pytest.MonkeyPatch, case: object) -> None:
    trace = case()  # type: ignore[operator]
    with stub.StubTraceApi([trace]) as api:
        at = run_app(monkeypatch, api.url, trace.request_id)
    assert not at.error and at.text[0].value
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["type"] == "waterfall"


def test_a_trace_with_a_policy_step_shows_the_rule_clauses_intent_and_attachments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.app.ui.data.test_policy_step import STEP

    trace = stub.sample_trace().model_copy(update={"request_id": "req-policy", "policy": STEP,
                                                   "rule": "long_context_priority"})
    with stub.StubTraceApi([trace]) as api:
        at = run_app(monkeypatch, api.url, "req-policy")
    assert "Routing rule" in [s.value for s in at.subheader]
    texts = [t.value for t in at.text]
    assert any(t.startswith("Rule long_context_priority matched after 1 tried") for t in texts)
    assert any("Intent abstained on the embedding path" in t for t in texts)
    assert [w.value for w in at.warning][-1].startswith("An attachment's bytes are not the type it was declared as")
    frames = [df.value for df in at.dataframe]
    clauses = next(f for f in frames if "matched" in f.columns)
    assert clauses["why"].tolist()[0].endswith("contains_legal_terms(prompt): true")
    files = next(f for f in frames if "detected" in f.columns)
    assert files["detected"].tolist() == ["docx"]


def test_every_rule_tried_shows_the_atom_that_failed_it_with_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.router_core.conftest import decide, healthy
    from tests.router_core.decide.test_router_rules import CONFIG, route

    _, trace = decide(healthy(), CONFIG, route=route(prompt="please be roomy", tokens=100), request_id="req-rules")
    with stub.StubTraceApi([trace]) as api:
        at = run_app(monkeypatch, api.url, "req-rules")
    frames = [df.value for df in at.dataframe]
    clauses = next(f for f in frames if "matched" in f.columns).set_index("rule")
    assert clauses.loc["to-small", "matched"] == "no" and clauses.loc["to-small", "why"] == "input_length = 100 <= 1000"
    assert clauses.loc["roomy", "matched"] == "yes" and "please be roomy" not in " ".join(clauses["why"])
    losers = next(f for f in frames if "why not" in f.columns).set_index("instance")["why not"]
    assert set(losers.index) == {c.instance for c in trace.candidates} - {trace.selected_instance}
    assert losers["big-a"].startswith("removed by rule/roomy")
    flip = next(t.value for t in at.text if "would have matched" in t.value)
    assert flip == "Had input_length been 1001, rule to-small would have matched instead of roomy: the smallest " \
                   "single change."


def test_the_opentelemetry_trace_id_is_shown(monkeypatch: pytest.MonkeyPatch, trace: Any) -> None:
    traced = trace.model_copy(update={"request_id": "req-otel-page", "otel_span_id": "b7ad6b7169203331",
                                      "otel_trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"})
    with stub.StubTraceApi([trace, traced]) as api:
        plain, shown = run_app(monkeypatch, api.url, trace.request_id), run_app(monkeypatch, api.url, "req-otel-page")
    assert not any("OpenTelemetry" in c.value for c in plain.caption)
    assert any("4bf92f3577b34da6a3ce929d0e0e4736" in c.value and "b7ad6b7169203331" in c.value for c in shown.caption)


def test_an_opentelemetry_trace_id_opens_its_decision(monkeypatch: pytest.MonkeyPatch, trace: Any,
                                                     tmp_path: Path) -> None:
    # An operator pastes the trace id their tracing backend shows: the page finds the decision by it.
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traced = trace.model_copy(update={"request_id": "req-from-jaeger", "otel_trace_id": trace_id,
                                      "otel_span_id": "b7ad6b7169203331"})
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    store.write_records([trace, traced])
    try:
        with stub.StubTraceApi([], store=store) as api:
            found = run_app(monkeypatch, api.url, trace_id)
            missing = run_app(monkeypatch, api.url, "0af7651916cd43dd8448eb211c80319c")
    finally:
        store.close()
    assert not any("No trace found" in w.value for w in found.warning)
    assert any("diff?a=req-from-jaeger" in m.value for m in found.markdown)  # the page holds that request's decision
    assert any(trace_id in c.value for c in found.caption)
    assert [w.value for w in missing.warning] == [
        "No trace found for this request_id or trace id. Check the id, or wait for the trace to be written."]
