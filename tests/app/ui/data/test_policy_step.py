"""The routing-policy step in words and rows, for the drill-down."""

from __future__ import annotations

from app.ui.data import policy_step as ps
from schemas.trace_policy import AttachmentInfo, ClauseTried, IntentVerdict, KeywordMatch, PolicyStep

STEP = PolicyStep(
    policy="policies/seed000.yaml sha256:0123456789abcdef", rule="long_context_priority",
    tried=[ClauseTried(rule="long_context_priority", matched=True,
                       detail=["input_length > 8000: false (input_length=40)", "contains_legal_terms(prompt): true"])],
    target="deepseek-v4-32k", chain=["deepseek-coder-6b-fp16", "legacy-rule-engine"],
    chain_used=["deepseek-v4-32k", "deepseek-coder-6b-fp16"], throttled="chain",
    intent=IntentVerdict(label=None, nearest="contract", confidence=0.41, threshold=0.55, abstained=True,
                         path="embedding", cut_tokens=512),
    keywords=[KeywordMatch(pattern="(年报|财报)", weight=3.0)], keyword_score=3.0,
    attachments=[AttachmentInfo(message=0, part=1, declared="pdf", detected="docx", bytes=2048, mismatch=True)],
)


def test_the_rule_sentence_says_what_matched_where_it_went_and_what_the_chain_did() -> None:
    assert ps.rule_sentence(STEP) == (
        "Rule long_context_priority matched after 1 tried; its target would have been deepseek-v4-32k, but its "
        "throttle was empty, so the request went down its chain instead. "
        "Chain deepseek-coder-6b-fp16 → legacy-rule-engine; used deepseek-v4-32k → deepseek-coder-6b-fp16.")
    none = PolicyStep(policy="p.yaml sha256:x", tried=[ClauseTried(rule="a", matched=False)])
    assert ps.rule_sentence(none) == "No rule of p.yaml sha256:x matched (1 tried): every model was scored as usual."


def test_rows_for_clauses_keywords_and_attachments() -> None:
    why = "input_length > 8000: false (input_length=40); contains_legal_terms(prompt): true"
    assert ps.clauses_rows(STEP) == [{"rule": "long_context_priority", "matched": "yes", "why": why}]
    assert ps.keyword_rows(STEP) == [{"pattern": "(年报|财报)", "weight": 3.0}]
    assert ps.attachments_rows(STEP) == [{"where": "messages[0].content[1]", "declared": "pdf", "detected": "docx",
                                          "bytes": 2048, "mismatch": "yes"}]


def test_an_abstained_intent_says_the_rule_layer_decided_and_the_cut() -> None:
    sentence = ps.intent_sentence(STEP)
    assert sentence is not None and "abstained on the embedding path: nearest contract at 0.41 < threshold 0.55" \
        in sentence and "Input cut at 512 tokens." in sentence
    assert ps.intent_sentence(PolicyStep(policy="p")) is None
    assert "waited" not in sentence


def test_a_query_that_waited_for_the_first_fit_says_how_long() -> None:
    intent = IntentVerdict(label="contract", nearest="contract", confidence=0.82, threshold=0.58, path="fast",
                           waited_s=64.651)
    sentence = ps.intent_sentence(PolicyStep(policy="p", intent=intent))
    assert sentence is not None and sentence.startswith("Intent contract at 0.82 (threshold 0.58, fast path).")
    assert "waited 64.65 s for the intents' first fit" in sentence


def test_a_rule_not_matched_shows_the_atom_that_failed_it_first() -> None:
    hour = ClauseTried(rule="urgent", matched=False, detail=["request_time.hour = 17 not in [9, 11, 14, 16]"])
    quick = ClauseTried(rule="legal", matched=False, detail=['intent = "chat" != "legal"', ps.MORE])
    every = ClauseTried(rule="long", matched=False, detail=["input_length = 40 <= 8000",
                                                             "contains_legal_terms(prompt) did not match"])
    step = PolicyStep(policy="p.yaml sha256:x", tried=[hour, quick, every, ClauseTried(rule="old", matched=False)])
    assert [r["why"] for r in ps.clauses_rows(step)] == [
        "request_time.hour = 17 not in [9, 11, 14, 16]", 'intent = "chat" != "legal"; other atoms failed too',
        "input_length = 40 <= 8000; also contains_legal_terms(prompt) did not match", "—"]


def test_the_rule_sentence_says_how_long_a_throttled_request_waited() -> None:
    waited = STEP.model_copy(update={"throttled": "wait", "waited_s": 0.42, "chain_used": ["deepseek-v4-32k"]})
    assert ps.rule_sentence(waited) == (
        "Rule long_context_priority matched after 1 tried; its throttle was empty, so the request waited 0.42 s "
        "for a token, then was sent to deepseek-v4-32k. "
        "Chain deepseek-coder-6b-fp16 → legacy-rule-engine; used deepseek-v4-32k.")
    ran_out = STEP.model_copy(update={"throttled": "reject", "waited_s": 1.0, "chain_used": []})
    assert ps.rule_sentence(ran_out) == (
        "Rule long_context_priority matched after 1 tried; its target would have been deepseek-v4-32k, but its "
        "throttle was empty, and the request waited 1.0 s (its max_wait) without a token, so it was refused with "
        "429 (rate_limit_exceeded): nothing was forwarded. Chain deepseek-coder-6b-fp16 → legacy-rule-engine; "
        "not tried.")
    # refused at once (the wait would have been longer than max_wait), or a trace from before waited_s
    at_once = ran_out.model_copy(update={"waited_s": None})
    assert "so the request was refused with 429" in ps.rule_sentence(at_once) and \
        "waited" not in ps.rule_sentence(at_once)
    unknown = waited.model_copy(update={"waited_s": None})
    assert "so the request waited for a token, then was sent to" in ps.rule_sentence(unknown)


def test_seconds_waited_read_to_the_hundredth_and_short_waits_to_the_millisecond() -> None:
    assert [ps.fmt_waited(s) for s in (0.42, 1.0, 0.5, 12.345, 0.005, 0.0)] == [
        "0.42 s", "1.0 s", "0.5 s", "12.35 s", "0.005 s", "0.0 s"]
