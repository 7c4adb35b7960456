from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from app.cli.trace_tree import render_trace
from schemas import CandidateEval, DecisionTrace, Violation
from tests.app import stub_trace_api as stub


def as_text(tree: Tree) -> str:
    console = Console(width=240, record=True, color_system=None, file=io.StringIO())
    console.print(tree)
    return console.export_text()


def find_label(tree: Tree, startswith: str) -> Text:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node.label, Text) and node.label.plain.startswith(startswith):
            return node.label
        stack.extend(node.children)
    raise AssertionError(f"no node starting with {startswith!r}")


@pytest.fixture
def text(trace: DecisionTrace) -> str:
    return as_text(render_trace(trace))


def test_header(text: str, trace: DecisionTrace) -> None:
    head = "\n".join(text.splitlines()[:3])
    for expected in (
        "Decision trace req-7f3a9c",
        "ts 2025-11-29T12:00:00+00:00",
        "router 0.1.0",
        f"policy {trace.policy_hash}",
        "mode normal",
        "decision 1.84 ms",
        "arm B",
        f"query {trace.query_hash}",
    ):
        assert expected in head


def test_a_forced_arm_says_so(trace: DecisionTrace) -> None:
    assert "arm B" in as_text(render_trace(trace)) and "forced" not in as_text(render_trace(trace))
    forced = as_text(render_trace(trace.model_copy(update={"arm_forced": True})))
    assert "arm B (forced by header: left out of comparisons)" in forced


def test_features_and_steps_in_order(text: str) -> None:
    assert "requested_model: auto" in text
    assert "est_input_tokens: 460" in text
    assert "rule code-default  intent code (0.82)" in text
    positions = [text.index(f"#{i} ") for i in range(10)]
    assert positions == sorted(positions)
    filter_line = next(line for line in text.splitlines() if "filter/kv-cache" in line)
    assert "[filter]" in filter_line
    assert f"kept: {stub.TOP_RANKED}, {stub.SELECTED_INSTANCE}" in filter_line
    assert f"rejected: {stub.REJECTED_INSTANCE}" in filter_line


def test_candidates_ranked_then_rejected(text: str) -> None:
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if "feasible" in line or "REJECTED" in line]
    order = [
        next(c for c in (stub.TOP_RANKED, stub.SELECTED_INSTANCE, stub.REJECTED_INSTANCE) if c in lines[i])
        for i in heads
    ]
    assert order == [stub.TOP_RANKED, stub.SELECTED_INSTANCE, stub.REJECTED_INSTANCE]
    assert "rank 1  total 0.742" in lines[heads[0]]
    assert "rank 2  total 0.610  ← selected" in lines[heads[1]]


def test_rejected_candidate_shows_violation(text: str) -> None:
    assert f"{stub.REJECTED_INSTANCE} (qwen2.5-7b, local-a)  REJECTED" in text
    assert f"violation kv-cache: kv_cache_usage 97% > 90% — {stub.KV_REASON}" in text
    assert "state queue 14  running 8  kv 97%  warmup 100%  err 0%  age 1.2 s" in text


def test_rejected_verdict_is_red_and_feasible_green(trace: DecisionTrace) -> None:
    tree = render_trace(trace)

    def style_of(label: Text, word: str) -> str:
        start = label.plain.index(word)
        return " ".join(str(s.style) for s in label.spans if s.start <= start < s.end)

    assert "red" in style_of(find_label(tree, stub.REJECTED_INSTANCE), "REJECTED")
    assert "green" in style_of(find_label(tree, stub.TOP_RANKED), "feasible")


def test_score_terms_and_totals(text: str) -> None:
    assert "score queue-depth 0.900×0.300=0.270" in text
    assert "score kv-cache 0.580×0.400=0.232" in text
    assert "score latency 0.800×0.300=0.240" in text
    assert "total 0.742  rank 1" in text


def test_selection_attempts_outcome(text: str) -> None:
    assert f"{stub.SELECTED_MODEL} → {stub.SELECTED_INSTANCE}" in text
    assert f"fallback {stub.FALLBACK_REASON}" in text
    assert f"#0 {stub.TOP_RANKED} (qwen2.5-7b) timeout ReadTimeout  3,000 ms" in text
    assert f"#1 {stub.SELECTED_INSTANCE} ({stub.SELECTED_MODEL}) ok HTTP 200  812 ms" in text
    assert "Outcome ok · HTTP 200 · 3,890 ms" in text
    for expected in ("tokens: 460 in / 212 out", "cost: 0.00042", "ttft: 95 ms", "total: 3,890 ms"):
        assert expected in text


def test_values_are_not_parsed_as_markup(trace: DecisionTrace) -> None:
    odd = CandidateEval(
        instance="odd-1",
        model="m",
        feasible=False,
        violations=[
            Violation(constraint="[bold]x[/bold]", metric="m", op=">", value=1, threshold=0, reason="[red]why")
        ],
    )
    text = as_text(render_trace(trace.model_copy(update={"candidates": [odd]})))
    assert "violation [bold]x[/bold]: m 1 > 0 — [red]why" in text


def test_minimal_trace(trace: DecisionTrace) -> None:
    bare = trace.model_copy(
        update={
            "candidates": [],
            "decision_trace": [],
            "attempts": [],
            "selected_model": None,
            "selected_instance": None,
            "fallback_triggered": False,
            "experiment_arm": None,
        }
    )
    text = as_text(render_trace(bare))
    assert "Candidates (0)" in text
    assert "Steps (0)" in text
    assert "no instance selected" in text
    assert "fallback no" in text
    assert "arm " not in text.splitlines()[1]


def test_header_shows_the_opentelemetry_trace_id(trace: DecisionTrace) -> None:
    assert "trace id" not in as_text(render_trace(trace))  # none recorded: no line
    traced = trace.model_copy(update={"otel_trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
                                      "otel_span_id": "b7ad6b7169203331"})
    head = as_text(render_trace(traced)).splitlines()[:4]
    assert "trace id 4bf92f3577b34da6a3ce929d0e0e4736  span b7ad6b7169203331" in head


def test_a_big_fleet_s_candidates_are_shown_best_first_up_to_the_limit_and_the_rest_counted(
        trace: DecisionTrace) -> None:
    # 200 candidates printed 1,456 lines: the best N in full, those tried or served always, the rest in one line
    top, selected, rejected = (next(c for c in trace.candidates if c.instance == i)
                               for i in (stub.TOP_RANKED, stub.SELECTED_INSTANCE, stub.REJECTED_INSTANCE))
    more = [top.model_copy(update={"instance": f"extra-{n:02}", "rank": 10 + n}) for n in range(12)]
    more += [rejected.model_copy(update={"instance": f"full-{n:02}"}) for n in range(9)]
    big = trace.model_copy(update={"candidates": [*trace.candidates, *more]})
    shown = as_text(render_trace(big, candidates=5))
    assert [f"extra-{n:02}" in shown for n in range(12)] == [True] * 3 + [False] * 9  # the 5 best: 2 + 3 extras
    assert selected.instance in shown and "full-" not in shown
    assert "… 19 more: 9 feasible; 10 rejected (kv-cache 10)" in shown
    tried = big.model_copy(update={"candidates": [*more, *trace.candidates]})
    assert all(a.instance in as_text(render_trace(tried, candidates=1)) for a in trace.attempts)  # always shown
    everything = as_text(render_trace(big))
    assert all(c.instance in everything for c in big.candidates) and "more:" not in everything


def test_a_state_stamped_finer_than_a_tenth_shows_its_age_to_the_tenth(trace: DecisionTrace) -> None:
    """The round's own stamp (0.00261 s, within a tenth of the decision) reads as the trace page reads it."""
    fine = [c.model_copy(update={"state": c.state.model_copy(update={"age_s": 0.00261})}) if c.state else c
            for c in trace.candidates]
    text = as_text(render_trace(trace.model_copy(update={"candidates": fine})))
    assert "age 0.0 s" in text and "0.00261" not in text
