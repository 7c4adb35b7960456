"""Rule-scored intent: which class of traffic a query belongs to (the seed's rule-enhanced routing).

Each class has weighted Chinese and English patterns; the class with the highest total wins and the
confidence is its share of all matched weight. Nothing matched means ``chat`` with low confidence.
Only the first ``max_chars`` characters are looked at (analysis input is bounded).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CLASSES", "Intent", "classify_intent"]

CLASSES = ("contract", "ticket", "code", "math", "chat")

_RULES: dict[str, list[tuple[re.Pattern[str], float]]] = {
    "contract": [
        (re.compile(r"条款|合同|协议|第[0-9一二三四五六七八九十百]+[条章款]|违约|法规|监管|合规"), 3.0),
        (re.compile(r"\b(clause|contract|agreement|liabilit|indemnif|regulation|compliance|warrant)", re.I), 3.0),
    ],
    "ticket": [
        (re.compile(r"工单|紧急|退款|投诉|客服|账户|冻结|分类"), 3.0),
        (re.compile(r"\b(ticket|refund|complain|customer|account|urgent|classify|escalat)", re.I), 2.5),
    ],
    "code": [
        (re.compile(r"```|\bdef |\bclass |\bimport |=>|;\s*$|\{\s*$|\bfunction\b|\breturn\b", re.M), 3.0),
        (re.compile(r"代码|函数|编程|报错|\b(python|java|sql|bug|stack ?trace|compile|regex)\b", re.I), 2.5),
    ],
    "math": [
        (re.compile(r"[0-9]+\s*[-+*/^=]\s*[0-9]+|\\frac|\\sum|∫|√|方程|计算|求解|概率|公式|利率"), 3.0),
        (re.compile(r"\b(equation|integral|derivative|probability|solve|calculate|interest rate)\b", re.I), 2.5),
    ],
}


@dataclass(frozen=True, slots=True)
class Intent:
    """The winning class, its confidence in [0, 1], and the raw rule score."""

    cls: str
    confidence: float
    score: float


def classify_intent(text: str, max_chars: int = 4000) -> Intent:
    """Classify ``text`` by the rule table."""
    head = text[:max_chars]
    scores = {cls: sum(w for pattern, w in rules if pattern.search(head)) for cls, rules in _RULES.items()}
    best = max(scores, key=lambda c: (scores[c], -CLASSES.index(c)))
    total = sum(scores.values())
    if total == 0:
        return Intent("chat", 0.3, 0.0)
    return Intent(best, round(scores[best] / total, 4), scores[best])
