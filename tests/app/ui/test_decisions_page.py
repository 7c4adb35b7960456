"""The Decisions page over a DuckDB store seeded here: filters, pagination, query hashing, deep links, bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.reader import DB_ENV
from ingest import DuckDBTraceStore
from schemas import Outcome, OutcomeStatus, query_hash
from tests.app.ui.pages import assert_clean, open_app_page
from tests.factories import make_trace

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")
N = 60
SECRET = "hello world"


def seeded(i: int, now: datetime) -> object:
    status = OutcomeStatus.ERROR if i % 7 == 0 else OutcomeStatus.OK
    out = Outcome(status=status, http_status=500 if i % 7 == 0 else 200, total_ms=100.0 + 10 * i)
    trace = make_trace(f"req-{i:03d}", ts=now - timedelta(minutes=30) + timedelta(seconds=i),
                       rule="code" if i % 3 == 0 else "chat", fallback_triggered=i % 5 == 0,
                       query_hash=query_hash(SECRET if i == 7 else f"q{i}"), outcome=out)
    if i % 4 == 0:  # nothing removed: only the selected candidate
        trace = trace.model_copy(update={"candidates": trace.candidates[1:]})
    return trace


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_streamlit_caches: None) -> Path:
    path = tmp_path / "traces.duckdb"
    store = DuckDBTraceStore(path)
    now = datetime.now(UTC)  # the page's window ends now; nothing below depends on how long the test takes
    try:
        store.write_records([seeded(i, now) for i in range(N)])
    finally:
        store.close()
    monkeypatch.setenv(DB_ENV, str(path))
    monkeypatch.delenv("ROUTELENS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: queries hash without a key
    return path


def open_page(**params: str) -> AppTest:
    return open_app_page("views/decisions.py", **params)


def ids(at: AppTest) -> list[str]:
    return at.dataframe[0].value["request_id"].tolist() if at.dataframe else []


@pytest.mark.usefixtures("db")
def test_first_page_next_and_previous() -> None:
    at = open_page()
    assert not at.warning and not at.error, [e.value for e in at.error]
    first = ids(at)
    assert len(first) == 50 and first[0] == "req-059"  # newest first
    assert at.dataframe[0].value["open"].iloc[0] == "trace?request_id=req-059"

    at.button(key="dec_next").click().run()
    assert ids(at) == [f"req-{i:03d}" for i in range(9, -1, -1)]
    assert at.query_params["pages"]
    assert at.button(key="dec_next").disabled

    at.button(key="dec_prev").click().run()
    assert ids(at) == first and "pages" not in at.query_params


@pytest.mark.usefixtures("db")
def test_a_filter_changes_the_results_and_lands_in_the_url() -> None:
    at = open_page()
    at.text_input(key="dec_rule").set_value("code").run()
    got = ids(at)
    assert len(got) == 20 and all(int(r[4:]) % 3 == 0 for r in got)
    assert at.query_params["rule"] == "code"

    at.selectbox(key="dec_outcome").set_value("error").run()
    assert ids(at) == ["req-042", "req-021", "req-000"]
    assert at.query_params["outcome"] == "error"


@pytest.mark.usefixtures("db")
def test_deep_link_restores_the_search() -> None:
    at = open_page(rule="code", fallback="yes", min_ms="100", max_ms="400")
    assert at.text_input(key="dec_rule").value == "code"
    assert at.selectbox(key="dec_fallback").value == "yes"
    assert ids(at) == ["req-015", "req-000"]  # code, fallback, total in [100, 400)


@pytest.mark.usefixtures("db")
def test_latency_range() -> None:
    at = open_page(min_ms="500", max_ms="600")
    assert ids(at) == [f"req-{i:03d}" for i in range(49, 39, -1)]


@pytest.mark.usefixtures("db")
def test_typed_query_is_hashed_and_only_the_hash_is_kept() -> None:
    at = open_page()
    at.text_input(key="dec_qtext").input("  Hello   WORLD ")
    at.button[0].click().run()  # the form's submit button
    assert not at.exception
    assert at.query_params["qh"] == query_hash(SECRET)
    assert ids(at) == ["req-007"]
    assert at.text_input(key="dec_qtext").value == ""
    assert all(SECRET not in str(v).lower() for v in at.query_params.values())
    assert all("hello" not in str(at.session_state[k]).lower() for k in ("dec_qtext", "dec_rule", "dec_pages"))


@pytest.mark.usefixtures("db")
@pytest.mark.parametrize("rule", ["' OR 1=1 --", '"; DROP TABLE traces; --', "规则-ü-🚀", "../../etc/passwd"])
def test_hostile_values_find_nothing(rule: str) -> None:
    at = open_page(rule=rule)
    assert not at.error and not at.dataframe
    assert [i.value for i in at.info] == ["No decisions match."]


@pytest.mark.usefixtures("db")
@pytest.mark.parametrize(("params", "says"), [
    ({"rule": "x" * 10_000}, "rule"),
    ({"model": "m" * 10_000}, "model: at most 200 characters"),
    ({"min_ms": "abc"}, "min latency: enter a number"),
    ({"max_ms": "-5"}, "max latency"),
    ({"min_ms": "9", "max_ms": "1"}, "min latency is above max latency"),
    ({"qh": "sha256:' OR 1=1"}, "query hash: not a query hash"),
    ({"min_ms": "nan"}, "min latency"),
])
def test_bad_values_give_a_validation_message(params: dict[str, str], says: str) -> None:
    at = open_page(**params)
    assert len(at.warning) == 1 and says in at.warning[0].value
    assert not at.dataframe and not at.error


@pytest.mark.usefixtures("db")
def test_a_choice_not_offered_is_ignored_with_a_message() -> None:
    at = open_page(fallback="maybe'<script>")
    assert "Ignored fallback=" in at.warning[0].value and "choose one of the offered values" in at.warning[0].value
    assert len(ids(at)) == 50 and "fallback" not in at.query_params


@pytest.mark.usefixtures("db")
def test_a_forged_page_cursor_falls_back_to_the_first_page() -> None:
    at = open_page(pages="bm90LWEtY3Vyc29y")
    assert "no longer valid" in at.warning[0].value
    at.button(key="dec_first").click().run()
    assert len(ids(at)) == 50


def test_unreachable_store(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    monkeypatch.setenv("ROUTELENS_API_URL", closed_port_url)
    at = open_page()
    assert "Trace source unreachable" in at.error[0].value


@pytest.mark.usefixtures("db")
def test_the_table_is_full_height_coloured_and_filters_by_violation() -> None:
    at = open_page()
    assert_clean(at, placeholder_tables=(0,))  # the table's missing costs show its placeholder, —
    table = at.dataframe[0]
    frame = table.value
    assert frame.loc[frame["request_id"] == "req-056", "violations"].item() == ""
    assert frame.loc[frame["request_id"] == "req-057", "violations"].item() == "kv-cache"
    assert "None" not in frame.astype(str).to_string()
    styles = table.proto.arrow_data.styler.styles
    assert "#f8d7da" in styles and "#d4edda" in styles  # error red, ok green
    assert any(c.value == "Page 1: 50 decisions, more on the next page. Cost in cost units, latencies in ms."
               for c in at.caption)

    # The store filters by violation: the pages hold only such decisions, all of them across pages.
    at.selectbox(key="dec_violation").set_value("kv-cache").run()
    kept = ids(at)
    assert kept == [f"req-{i:03d}" for i in range(N - 1, -1, -1) if i % 4][:50]
    assert at.query_params["violation"] == "kv-cache"
    assert any(c.value.startswith("Page 1: 45 decisions in which a candidate broke kv-cache.") for c in at.caption)


def test_an_unset_key_is_no_warning_when_the_traces_are_unkeyed(db: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # The configuration names a key variable that is set neither here nor at the gateway: the gateway
    # hashed without it (sha256:), so a typed query matches and nothing may say otherwise.
    config = tmp_path / "keyed.yaml"
    config.write_text("router: {hash_key_env: ROUTELENS_HASH_KEY}\n"
                      "fleet: {instances: [{id: a, model: m, url: 'http://127.0.0.1:9'}]}\n", encoding="utf-8")
    monkeypatch.setenv("ROUTELENS_CONFIG", str(config))
    monkeypatch.delenv("ROUTELENS_HASH_KEY", raising=False)
    at = open_page()
    at.text_input(key="dec_qtext").input(SECRET)
    at.button[0].click().run()
    assert ids(at) == ["req-007"] and not at.warning
    assert any("hashed without a key, as the traces here were" in c.value for c in at.caption)


def test_the_violation_choices_include_the_removals_the_store_reports(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Probe, breaker and freshness removals are not configured constraints; the store names them."""
    from schemas import Violation

    now = datetime.now(UTC)
    traces = []
    for i, name in enumerate(("probe", "breaker", "freshness")):
        trace = make_trace(f"req-{i:03d}", ts=now - timedelta(minutes=5 + i))
        out = [c.model_copy(update={"violations": [Violation(constraint=name, metric=name, op="ok", value=None,
                                                              threshold=0.0, reason=f"{name} says no")]})
               if not c.feasible else c for c in trace.candidates]
        traces.append(trace.model_copy(update={"candidates": out}))
    path = tmp_path / "traces.duckdb"
    store = DuckDBTraceStore(path)
    try:
        store.write_records(traces)
    finally:
        store.close()
    monkeypatch.setenv(DB_ENV, str(path))
    monkeypatch.delenv("ROUTELENS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    at = open_page()
    options = at.selectbox(key="dec_violation").options
    assert {"probe", "breaker", "freshness", "kv-cache"} <= set(options), options
    at.selectbox(key="dec_violation").set_value("breaker").run()
    assert ids(at) == ["req-001"] and at.query_params["violation"] == "breaker"


DEFAULT_COLUMNS = ["open", "ts", "outcome", "rule", "model", "fallback"]


def shown(at: AppTest) -> list[str]:
    return list(at.dataframe[0].proto.column_order)


@pytest.mark.usefixtures("db")
def test_the_default_columns_are_few_and_the_rest_can_be_picked() -> None:
    """Every column at once scrolled sideways below about 1600 px (the browser test measures the fit)."""
    at = open_page()
    assert shown(at) == DEFAULT_COLUMNS  # the request id is the first column's link text
    assert {"instance", "total_ms", "violations", "cost"} <= set(at.dataframe[0].value.columns)  # all still read
    picker = at.multiselect(key="dec_columns")
    assert picker.value == [] and "request_id" not in picker.options and "open" not in picker.options
    picker.select("total_ms").select("instance").run()
    assert shown(at) == ["open", "ts", "outcome", "rule", "model", "instance", "fallback", "total_ms"]
    assert at.query_params["columns"] == "instance,total_ms"
    at.text_input(key="dec_rule").set_value("code").run()  # a filter keeps the choice
    assert "instance" in shown(at) and len(ids(at)) == 20
    at.multiselect(key="dec_columns").unselect("instance").unselect("total_ms").run()
    assert shown(at) == DEFAULT_COLUMNS and "columns" not in at.query_params


@pytest.mark.usefixtures("db")
def test_a_link_picks_the_columns_and_a_name_not_offered_is_ignored_with_a_message() -> None:
    at = open_page(columns="cost,request_id,bogus")
    assert shown(at) == [*DEFAULT_COLUMNS, "cost"]
    assert "Ignored columns=" in at.warning[0].value and "offered columns" in at.warning[0].value
    assert at.query_params["columns"] == "cost"
