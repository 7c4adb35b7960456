"""The simulator's query corpus: ground truth, answers right, wrong or drifted, and text helpers.

Everything here was written for RouteLens. The classes follow the seeds' traffic: ``contract``
(long clause and regulation analysis), ``ticket`` (short customer tickets, some marked 紧急),
``code``, ``math`` and ``chat``, each in Chinese and English. The data is in
:mod:`sim.corpus_data`; this module looks queries up, composes answers and grades them.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from schemas.hashing import normalize_query
from sim.corpus_data import (
    ANSWERS,
    CLASSES,
    FOLLOW_UPS,
    QUERIES,
    REFERENCE_DRIFT,
    REFERENCE_PARAPHRASES,
    Lang,
    Query,
    QueryClass,
)

__all__ = [
    "ANSWERS",
    "CLASSES",
    "FOLLOW_UPS",
    "QUERIES",
    "Answer",
    "Grade",
    "Query",
    "QueryClass",
    "Verdict",
    "reference_answer",
    "classify",
    "compose_answer",
    "detect_lang",
    "estimate_tokens",
    "grade",
    "ground_truth",
    "session_text",
    "topic_of",
    "truncate_tokens",
]

Verdict = Literal["correct", "wrong", "drift"]
Grade = Literal["correct", "wrong", "off-topic"]

_KEYWORDS: dict[QueryClass, tuple[str, ...]] = {
    "contract": ("合同", "条款", "协议", "违约", "监管", "法规", "甲方", "乙方", "clause", "contract", "agreement",
                 "regulation", "liability", "indemn"),
    "ticket": ("工单", "客户", "投诉", "紧急", "退款", "冻结", "优先级", "ticket", "urgent", "complaint", "refund",
               "customer", "priority"),
    "code": ("```", "代码", "python", "sql", "javascript", "def ", "function", "bug", "refactor", "return"),
    "math": ("方程", "积分", "计算", "概率", "求解", "利率", "equation", "solve", "derivative", "integral",
             "probability", "compute"),
}
_CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def classify(text: str) -> QueryClass:
    """Return the traffic class of ``text`` by keyword hits; ``chat`` when nothing matches.

    Args:
        text: Usually the last user message.

    Returns:
        The class with the most keyword hits, earlier classes winning ties.
    """
    lowered = text.lower()
    hits = {cls: sum(lowered.count(k) for k in words) for cls, words in _KEYWORDS.items()}
    best = max(hits, key=lambda cls: hits[cls])
    return best if hits[best] > 0 else "chat"


def detect_lang(text: str) -> Lang:
    """Return ``zh`` when CJK characters carry at least a third of the estimated tokens."""
    cjk = len(_CJK.findall(text))
    return "zh" if cjk and 3 * cjk >= estimate_tokens(text) else "en"


def estimate_tokens(text: str) -> int:
    """Estimate tokens: one per CJK character, one per four other characters (rounded up)."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def truncate_tokens(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` estimated tokens (the cost model of :func:`estimate_tokens`)."""
    budget = 4 * limit  # in quarter tokens: a CJK character costs 4, anything else 1
    for index, char in enumerate(text):
        budget -= 4 if _CJK.match(char) else 1
        if budget < 0:
            return text[:index]
    return text


_SESSION_PREFIX = re.compile(r"^\[(?:工单|ticket) [a-z]-\d+\] ")
_BY_TEXT: dict[str, Query] = {normalize_query(q.text): q for q in QUERIES}


def session_text(query: Query, ticket_id: str) -> str:
    """Return ``query`` prefixed with a session's ticket id (``[工单 T-123456] ...``)."""
    return f"[{'工单' if query.lang == 'zh' else 'ticket'} {ticket_id}] {query.text}"


def ground_truth(text: str) -> Query | None:
    """Return the corpus query ``text`` is (a ticket-id prefix allowed), or None for foreign text."""
    normal = normalize_query(text)
    return _BY_TEXT.get(_SESSION_PREFIX.sub("", normal, count=1))


def topic_of(user_texts: Sequence[str]) -> str:
    """The message an answer is about: the latest user text with ground truth, else the latest one."""
    for text in reversed(user_texts):
        if ground_truth(text) is not None:
            return text
    return user_texts[-1] if user_texts else ""


@dataclass(frozen=True, slots=True)
class Answer:
    """A composed answer, and the pieces it is streamed in with their token counts."""

    text: str
    tokens: int
    finish_reason: Literal["stop", "length"]
    pieces: tuple[tuple[str, int], ...]


# Natural answer length per class in estimated tokens: short ticket labels, long clause reviews.
_TARGET_TOKENS: dict[QueryClass, tuple[int, int]] = {
    "contract": (90, 220), "ticket": (12, 40), "code": (50, 140), "math": (25, 80), "chat": (12, 50),
}
_PIECE_CHARS = 16


_REFERENCES = {prompt.strip(): answers for prompt, answers in REFERENCE_PARAPHRASES.items()}


def reference_answer(prompt: str, rng: random.Random, verdict: Verdict = "correct") -> str | None:
    """The answer to a semantic-probe reference prompt, or None when ``prompt`` is not one.

    A ``drift`` verdict gets fluent off-topic text in the prompt's language; any other verdict one
    of the reference answer's paraphrases (the probe checks meaning, not the grader's facts).
    """
    paraphrases = _REFERENCES.get(prompt.strip())
    if paraphrases is None:
        return None
    if verdict != "drift":
        return rng.choice(paraphrases)
    lang: Lang = detect_lang(prompt)
    return ("" if lang == "zh" else " ").join(rng.sample(REFERENCE_DRIFT[lang], 2))


def _pieces(text: str, finish: Literal["stop", "length"]) -> Answer:
    pieces = tuple(text[i : i + _PIECE_CHARS] for i in range(0, len(text), _PIECE_CHARS))
    return Answer(text, estimate_tokens(text), finish, tuple((p, estimate_tokens(p)) for p in pieces))


def compose_answer(prompt: str, rng: random.Random, limit: int, verdict: Verdict = "correct") -> Answer:
    """Compose an answer to ``prompt``: its fact (or wrong fact) then on-topic filler of its class.

    Args:
        prompt: The text the answer is about (see :func:`topic_of`).
        rng: Chooses filler and length; seed it from the request for deterministic answers.
        limit: Most tokens the answer may have; a longer one is cut and finishes with ``length``.
        verdict: ``correct`` states the query's fact, ``wrong`` its plausible mistake, ``drift`` is
            fluent filler of another class (off-topic).

    Returns:
        The answer.
    """
    reference = reference_answer(prompt, rng, verdict)
    if reference is not None:
        if estimate_tokens(reference) > limit:
            return _pieces(truncate_tokens(reference, max(limit, 0)), "length")
        return _pieces(reference, "stop")
    truth = ground_truth(prompt)
    cls = truth.cls if truth else classify(prompt)
    lang: Lang = truth.lang if truth else detect_lang(prompt)
    lead = ""
    if verdict == "drift":
        cls = rng.choice([c for c in CLASSES if c != cls])
    elif truth is not None:
        lead = truth.fact if verdict == "correct" else truth.wrong
    fragments = list(ANSWERS[cls][lang])
    rng.shuffle(fragments)
    target = rng.randint(*_TARGET_TOKENS[cls])
    sep = "" if lang == "zh" else " "
    parts = [lead] if lead else []
    while estimate_tokens(sep.join(parts)) < target:
        parts.append(fragments[len(parts) % len(fragments)])
    text = sep.join(parts)
    finish: Literal["stop", "length"] = "stop"
    if estimate_tokens(text) > limit:
        text, finish = truncate_tokens(text, max(limit, 0)), "length"
    return _pieces(text, finish)


def grade(query: Query, answer: str) -> Grade:
    """Grade an answer against ground truth: its fact stated, a mistake on topic, or off-topic."""
    if query.fact and query.fact in answer:
        return "correct"
    return "wrong" if classify(answer) == query.cls else "off-topic"
