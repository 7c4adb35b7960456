"""Decisions search data: URL ⇄ params, params → TraceFilter, query hashing with the configured key, rows."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.ui.data import decisions as dec
from schemas import OutcomeStatus, query_hash
from schemas.queries import TraceFilter, TracePage, TraceSummary
from tests.factories import make_trace

T = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
H = "sha256:" + "ab" * 32


def test_parse_round_trips_through_the_url() -> None:
    raw = {"rule": " code ", "fallback": "yes", "outcome": "error", "min_ms": "100", "max_ms": "250.5",
           "qhash": H, "violation": "kv-cache", "pages": "c1,c2"}
    params, problems = dec.parse_search(raw)
    assert problems == [] and params is not None
    assert params.rule == "code" and params.cursor == "c2"
    url = dec.to_query(params)
    assert url == {"rule": "code", "fallback": "yes", "outcome": "error", "min_ms": "100", "max_ms": "250.5",
                   "qh": H, "violation": "kv-cache", "pages": "c1,c2"}
    back, _ = dec.parse_search({f: url[k] for f, k in dec.URL_KEYS.items() if k in url})
    assert back == params


def test_defaults_leave_the_url_empty() -> None:
    params, _ = dec.parse_search({"fallback": "any", "rule": "  "})
    assert params is not None and dec.to_query(params) == {} and params.cursor is None


def test_params_narrow_the_scope_filter() -> None:
    base = TraceFilter(start=T, end=T.replace(hour=10), model="coder")
    params, _ = dec.parse_search({"rule": "code", "fallback": "no", "outcome": "ok", "min_ms": "5", "qhash": H,
                                  "violation": "queue"})
    assert params is not None
    flt = dec.search_filter(base, params)
    assert flt.model == "coder" and flt.start == T
    assert (flt.rule, flt.fallback, flt.outcome, flt.min_latency_ms, flt.max_latency_ms, flt.query_hash,
            flt.violation) == ("code", False, OutcomeStatus.OK, 5.0, None, H, "queue")
    any_params, _ = dec.parse_search({})
    assert any_params is not None and dec.search_filter(base, any_params) == base


@pytest.mark.parametrize(("raw", "says"), [
    ({"min_ms": "abc"}, "min latency: enter a number of milliseconds"),
    ({"max_ms": "-1"}, "max latency"),
    ({"min_ms": "inf"}, "min latency"),
    ({"min_ms": "3", "max_ms": "2"}, "min latency is above max latency"),
    ({"qhash": "' OR 1=1 --"}, "query hash: not a query hash"),
    ({"rule": "r" * 10_000}, "rule: String should have at most 200 characters"),
    ({"outcome": "maybe"}, "outcome: choose one of the offered values"),
    ({"violation": "kv%' OR 1=1"}, "violation"),
    ({"pages": "x" * 10_000}, "page"),
])
def test_bad_values_are_messages_not_exceptions(raw: dict[str, str], says: str) -> None:
    params, problems = dec.parse_search(raw)
    assert params is None and any(says in p for p in problems), problems


def test_scope_problems() -> None:
    assert dec.scope_problems(TraceFilter(model="m" * 201)) == ["model: at most 200 characters"]
    assert dec.scope_problems(TraceFilter(model="规则🚀")) == []


def test_hash_is_the_gateways_without_a_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert dec.hash_key({}) == (None, None)
    assert dec.hash_text("  Hello   WORLD ", {}) == query_hash("hello world")


def test_hash_uses_the_key_the_config_names(tmp_path: Path) -> None:
    cfg = tmp_path / "rl.yaml"
    cfg.write_text("router: {hash_key_env: RL_TEST_KEY}\n"
                   "fleet: {instances: [{id: a, model: m, url: 'http://127.0.0.1:9'}]}\n", encoding="utf-8")
    env = {dec.CONFIG_ENV: str(cfg), "RL_TEST_KEY": "s3cret"}
    assert dec.hash_key(env) == ("s3cret", "RL_TEST_KEY")
    assert dec.hash_text("合同 第3条", env) == query_hash("合同 第3条", "s3cret")
    assert dec.hash_text("q", env).startswith("hmac-sha256:")
    assert dec.hash_key({dec.CONFIG_ENV: str(cfg)}) == (None, "RL_TEST_KEY")  # named but not set here


def test_a_broken_config_hashes_without_a_key(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("router: [unclosed\n", encoding="utf-8")
    assert dec.hash_key({dec.CONFIG_ENV: str(cfg)}) == (None, None)


def test_rows_frame_links_each_row_to_the_drilldown() -> None:
    item = TraceSummary(request_id="req/1 ü", ts=T, router_version="v", query_hash=H, selected_model="m",
                        selected_instance="i", outcome_status=OutcomeStatus.OK, http_status=200, latency_ms=0.1,
                        total_ms=42.0)
    frame = dec.rows_frame(TracePage(items=[item]))
    assert list(frame.columns) == list(dec.ROW_COLUMNS)
    assert frame.loc[0, "open"] == "trace?request_id=req%2F1%20%C3%BC"
    assert frame.loc[0, "total_ms"] == 42.0
    assert dec.rows_frame(TracePage(items=[])).empty


KEYED, PLAIN = "hmac-sha256:" + "a" * 64, "sha256:" + "b" * 64


@pytest.mark.parametrize(("key", "env", "hashes", "level", "says"), [
    (None, "K", [PLAIN], "info", "as the traces here were"),  # issue 33: this was a false warning
    (None, "K", [KEYED], "warning", "$K is not set here"),
    (None, None, [KEYED], "warning", "names no router.hash_key_env"),
    ("s", "K", [KEYED], "info", "with the HMAC key from $K"),
    ("s", "K", [PLAIN], "warning", "unset it here"),
    (None, "K", [], "info", "($K is not set here)"),
])
def test_the_key_note_follows_the_stored_hashes(key: str | None, env: str | None, hashes: list[str], level: str,
                                                says: str) -> None:
    got_level, sentence = dec.key_note(key, env, hashes)
    assert got_level == level and says in sentence


def test_violations_are_listed_and_outcomes_coloured() -> None:
    trace = make_trace("r-1")
    assert dec.violations_of(trace) == ["kv-cache"]
    items = [TraceSummary(request_id=r, ts=T, router_version="v", query_hash=H, outcome_status=status,
                          http_status=200, latency_ms=0.1, total_ms=1.0) for r, status in
             (("r-1", OutcomeStatus.OK), ("r-2", OutcomeStatus.ERROR), ("r-3", OutcomeStatus.OK))]
    frame = dec.rows_frame(TracePage(items=items), {"r-1": ["kv-cache", "queue"], "r-2": []})
    assert frame["violations"].tolist() == ["kv-cache, queue", "", "—"]
    assert frame["rule"].tolist() == ["—"] * 3 and "None" not in frame.astype(str).to_string()
    assert [dec.outcome_colour(v) for v in ("ok", "error", "yes", "")] == [
        "background-color: #d4edda", "background-color: #f8d7da", "background-color: #fff3cd", ""]


def test_page_violations_one_search_per_name_within_the_page() -> None:
    items = [TraceSummary(request_id=f"r-{i}", ts=T.replace(minute=i), router_version="v", query_hash=H,
                          outcome_status=OutcomeStatus.OK, http_status=200, latency_ms=0.1, total_ms=1.0)
             for i in (5, 3, 1)]
    asked: list[TraceFilter] = []

    def search(flt: TraceFilter) -> list[str]:
        asked.append(flt)
        return {"kv-cache": ["r-5", "r-1", "r-outside"], "queue": ["r-1"]}.get(flt.violation or "", [])

    base = TraceFilter(start=T, end=T.replace(hour=10), rule="code")
    got = dec.page_violations(search, base, TracePage(items=items), ["queue", "kv-cache", "health"])
    assert got == {"r-5": ["kv-cache"], "r-3": [], "r-1": ["kv-cache", "queue"]}
    assert [f.violation for f in asked] == ["health", "kv-cache", "queue"]
    assert all(f.rule == "code" and f.start == T.replace(minute=1) and f.end is not None
               and f.end > T.replace(minute=5) for f in asked)  # the page's own span and filter
    assert dec.page_violations(search, base, TracePage(items=[]), ["queue"]) == {}
