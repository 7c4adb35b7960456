"""app.explain: the text a trace reads as, shared by the terminal tree and the page."""

from __future__ import annotations

import pytest

from app import explain as ex
from schemas import CandidateEval, DecisionTrace, Violation
from tests.app import stub_trace_api as stub


def test_violation_without_data() -> None:
    v = Violation(constraint="health", metric="error_rate", op=">", value=None, threshold=0.5, reason="")
    assert ex.violation_text(v) == "health: error_rate has no data (needs > 50%)"


def test_violation_text_is_not_garbled_by_a_restating_reason() -> None:
    """The issue's 'error_rate no data ≤ 0.15 — no data broke ≤ 0.15' reads once, with the latch kept."""
    v = Violation(constraint="health", metric="error_rate", op="<=", value=None, threshold=0.15,
                  reason="no data broke <= 0.15; latched out until 0.1 holds for 30s")
    expected = "health: error_rate has no data (needs <= 15%) — latched out until 0.1 holds for 30s"
    assert ex.violation_text(v) == expected
    plain = v.model_copy(update={"reason": "no data broke <= 0.15"})
    assert ex.violation_text(plain) == "health: error_rate has no data (needs <= 15%)"


@pytest.mark.parametrize(("metric", "value", "threshold", "text", "short"), [
    ("kv_cache_usage", 0.93, 0.85, "kv_cache_usage 93% > 85%", "93% > 85%"),
    ("p95_latency_ms", 1240.0, 800.0, "p95_latency_ms 1,240 ms > 800 ms", "1,240 ms > 800 ms"),
    ("queue", 12.0, 10.0, "queue 12 > 10", "12 > 10"),
    ("kv_cache_usage", 0.8512, 0.85, "kv_cache_usage 85.1% > 85.0%", "85.1% > 85.0%"),
    ("tokens", 12000.0, 8192.0, "tokens 12,000 > 8,192", "12,000 > 8,192"),
], ids=["share", "latency", "count", "close-to-the-bound", "unlisted-metric"])
def test_violation_reads_in_the_metric_unit(metric: str, value: float, threshold: float, text: str,
                                            short: str) -> None:
    v = Violation(constraint="c", metric=metric, op="<=", value=value, threshold=threshold, reason="")
    assert ex.violation_text(v) == f"c: {text}"
    assert ex.violation_short(v) == f"c {short}"


@pytest.mark.parametrize(("op", "value", "shown"), [("<=", 0.91, ">"), (">", 0.97, ">"), (">=", 0.2, "<"),
                                                    ("<", 3.0, ">=")])
def test_breach_op_reads_the_broken_relation(op: str, value: float, shown: str) -> None:
    threshold = 0.85 if op in ("<=", ">") else 0.5 if op == ">=" else 2.0
    v = Violation(constraint="c", metric="m", op=op, value=value, threshold=threshold, reason="")
    assert ex.breach_op(v) == shown


def test_non_numeric_rule_reads_its_reason() -> None:
    v = Violation(constraint="zone", metric="zone", op="in", value=None, threshold=2, reason="zone 'x' not in ['a']")
    assert ex.violation_text(v) == "zone: zone 'x' not in ['a']"
    assert ex.violation_short(v) == "zone (zone 'x' not in ['a'])"
    assert ex.breach_op(v) is None


def test_violation_short_with_since(trace: DecisionTrace) -> None:
    rejected = next(c for c in trace.candidates if not c.feasible)
    assert ex.violation_short(rejected.violations[0]) == "kv-cache 97% > 90% since 12:00:00"


def test_ordered_candidates_puts_unranked_feasible_before_rejected() -> None:
    def cand(name: str, feasible: bool, rank: int | None) -> CandidateEval:
        return CandidateEval(instance=name, model="m", feasible=feasible, rank=rank)

    cands = [cand("r", False, None), cand("u", True, None), cand("b", True, 2), cand("a", True, 1)]
    assert [c.instance for c in ex.ordered_candidates(cands)] == ["a", "b", "u", "r"]


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (None, 3, "—"),
        (0, 3, "0"),
        (0.742, 3, "0.742"),
        (0.00042, 3, "0.00042"),
        (14.0, 3, "14"),
        (3890, 1, "3,890"),
        (1.84, 2, "1.84"),
        (460, 0, "460"),
    ],
)
def test_fmt_num(value: float | None, digits: int, expected: str) -> None:
    assert ex.fmt_num(value, digits) == expected


def test_features_summary(trace: DecisionTrace) -> None:
    feats = ex.features_summary(trace)
    assert feats["requested_model"] == "auto"
    assert feats["est_input_tokens"] == "460"
    assert feats["language"] == "en"
    assert feats["truncated"] == "no"


def test_a_list_feature_the_trace_never_recorded_is_said_so(trace: DecisionTrace) -> None:
    """``file_types`` of a trace stored before the field existed (read back without it) is not "[]" (none)."""
    doc = trace.model_dump(mode="json")
    del doc["features"]["file_types"]
    older = DecisionTrace.model_validate(doc)
    assert older.features.file_types == [] and ex.features_summary(older)["file_types"] == "not recorded"
    recorded = DecisionTrace.model_validate(trace.model_dump(mode="json"))  # stored with its (empty) list
    assert ex.features_summary(recorded)["file_types"] == "[]"
    typed = trace.model_copy(update={"features": trace.features.model_copy(update={"file_types": ["pdf"]})})
    assert ex.features_summary(typed)["file_types"] == "['pdf']"


@pytest.mark.parametrize(("value", "expected"), [(None, "—"), (0.97, "97%"), (0.0, "0%"), (1.0, "100%")])
def test_fmt_pct(value: float | None, expected: str) -> None:
    assert ex.fmt_pct(value) == expected


@pytest.mark.parametrize(("value", "expected"), [(None, "—"), (True, "yes"), (False, "no"), (460, "460"), ("en", "en")])
def test_to_text(value: object, expected: str) -> None:
    assert ex.to_text(value) == expected


def test_outcome_text(trace: DecisionTrace) -> None:
    assert ex.outcome_text(trace) == "ok · HTTP 200 · 3,890 ms"


def test_selection_text(trace: DecisionTrace) -> None:
    assert ex.selection_text(trace) == f"{stub.SELECTED_MODEL} → {stub.SELECTED_INSTANCE}"
    assert ex.selection_text(trace.model_copy(update={"selected_model": None})) == f"? → {stub.SELECTED_INSTANCE}"
    assert ex.selection_text(trace.model_copy(update={"selected_model": None, "selected_instance": None})) is None


def test_violation_with_reason(trace: DecisionTrace) -> None:
    rejected = next(c for c in trace.candidates if not c.feasible)
    assert ex.violation_text(rejected.violations[0]) == f"kv-cache: kv_cache_usage 97% > 90% — {stub.KV_REASON}"


def test_an_instance_held_out_by_the_latch_says_so_not_a_satisfied_rule() -> None:
    """The audit's 'kv-cache 82% <= 85% since 13:13:07': 82% satisfies <= 85%; only the latch keeps it out."""
    since = stub.sample_trace().ts.replace(hour=13, minute=13, second=7)
    v = Violation(constraint="kv-cache", metric="kv_cache_usage", op="<=", value=0.82, threshold=0.85, since=since,
                  reason="kv_cache_usage 0.82 broke <= 0.85; latched out until 0.8 holds for 5s")
    assert ex.violation_short(v) == "kv-cache 82% (latched out since 13:13:07 until ≤80% for 5 s)"
    assert ex.violation_text(v) == "kv-cache: kv_cache_usage 82% (latched out until ≤80% for 5 s)"
    broken = v.model_copy(update={"value": 0.91, "reason": "kv_cache_usage 0.91 broke <= 0.85; latched out until "
                                                           "0.8 holds for 5s"})
    assert ex.violation_short(broken) == "kv-cache 91% > 85% since 13:13:07"
    assert ex.violation_text(broken) == "kv-cache: kv_cache_usage 91% > 85% — latched out until 0.8 holds for 5s"
    old = v.model_copy(update={"op": ">", "value": 0.91, "reason": "kv_cache_usage 0.91 broke <= 0.85; latched out "
                                                                   "until 0.8 holds for 5s"})
    assert ex.violation_short(old) == "kv-cache 91% > 85% since 13:13:07"  # an older trace wrote the breach as op
