"""One meaning of "misroute" in ``sim traffic``'s and the drill's summaries: feedback ``correct=false``.

The app's Overview, the rollups and every doc count a misroute from feedback; an answer served by
another model than the case expects is a different fact (it may well be right), counted as
``off_target`` and printed as "not the expected model".
"""

from __future__ import annotations

from sim.traffic import TrafficResult
from sim.traffic_report import format_traffic, summarise

EXPECTED = "deepseek-coder-6b-fp16"


def result(i: int, model: str, grade: str | None, feedback: int | None = 202) -> TrafficResult:
    ok = grade is not None
    return TrafficResult(index=i, cls="code", lang="en", query_hash="sha256:x", status="ok" if ok else "error",
                         http_status=200 if ok else 503, latency_ms=10.0, request_id=f"r{i}", sent_at_s=i * 0.1,
                         instance="i", model=model if ok else None, grade=grade, expected_model=EXPECTED,
                         feedback_status=feedback)


RESULTS = [
    result(0, "deepseek-v4-32k", "correct"),  # not the expected model, but right: no misroute
    result(1, EXPECTED, "wrong"),             # the expected model, answered wrong: a misroute
    result(2, EXPECTED, None),                # an error, posted correct=false: a misroute
    result(3, "deepseek-v4-32k", "wrong", feedback=409),  # its verdict was refused: nothing stored
    result(4, EXPECTED, "correct"),
]


def test_off_target_and_misroutes_are_counted_apart() -> None:
    summary = summarise(RESULTS)
    assert (summary["off_target"], summary["feedback_accepted"], summary["feedback_wrong"]) == (2, 4, 2)
    assert "misroutes" not in summary  # it meant off_target; a script reading it fails instead of misreading


def test_the_line_calls_only_feedback_misroutes() -> None:
    text = format_traffic(summarise(RESULTS))
    assert "not the expected model 2, feedback accepted 4 (2 wrong: misroutes)" in text
    assert text.count("misroute") == 1
