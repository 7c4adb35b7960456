"""The simulator's query corpus, canned answers, and the text helpers the instances use.

Everything here was written for RouteLens. The classes follow the seeds' traffic: ``contract``
(long clause and regulation analysis), ``ticket`` (short customer tickets, some marked 紧急),
``code``, ``math`` and ``chat``, each in Chinese and English.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ANSWERS",
    "CLASSES",
    "QUERIES",
    "Answer",
    "Query",
    "QueryClass",
    "classify",
    "compose_answer",
    "detect_lang",
    "estimate_tokens",
    "truncate_tokens",
]

QueryClass = Literal["contract", "ticket", "code", "math", "chat"]
Lang = Literal["zh", "en"]
CLASSES: tuple[QueryClass, ...] = ("contract", "ticket", "code", "math", "chat")


@dataclass(frozen=True, slots=True)
class Query:
    """One corpus query: its text, traffic class and language."""

    text: str
    cls: QueryClass
    lang: Lang


_CLAUSES_ZH = (
    "第一条 甲方应于每月五日前向乙方支付上月服务费用，逾期付款的，每日按未付金额的万分之五向乙方支付违约金。",
    "第二条 乙方应按照国家金融监管法规及甲方的数据安全制度处理客户信息，未经甲方书面同意不得向任何第三方披露。",
    "第三条 因不可抗力导致本合同无法履行的，受影响一方应在十日内书面通知对方，并提供有关机关出具的证明文件。",
    "第四条 任何一方违反本合同约定造成对方损失的，应承担赔偿责任，赔偿范围包括直接损失及合理的律师费用。",
    "第五条 本合同有效期三年，期满前三十日内任何一方未书面提出异议的，本合同自动续期一年，续期次数不限。",
    "第六条 因本合同引起的争议，双方应先友好协商；协商不成的，任何一方均可向甲方所在地人民法院提起诉讼。",
)
_CLAUSES_EN = (
    "Clause 1. The Customer shall pay each invoice within thirty days; late amounts accrue interest at 1.5% per month.",
    "Clause 2. The Supplier shall process personal data only on documented instructions and in line with applicable "
    "banking regulation, and shall notify the Customer of any breach within 72 hours.",
    "Clause 3. Neither party is liable for failure to perform caused by force majeure, provided it gives written "
    "notice within ten days.",
    "Clause 4. The Supplier's aggregate liability under this Agreement shall not exceed the fees paid in the twelve "
    "months before the claim, except for breach of confidentiality or wilful misconduct.",
    "Clause 5. This Agreement renews automatically for successive one-year terms unless either party gives sixty days' "
    "notice of termination.",
    "Clause 6. Any dispute shall be settled by arbitration in Singapore under the rules then in force.",
)
_ASKS_ZH = ("请逐条分析以下合同条款的法律风险，并指出对甲方不利之处：", "根据相关监管法规，审查下列条款是否合规：",
            "请概括以下协议中违约责任与争议解决的安排：")
_ASKS_EN = ("Analyse the legal risk of each contract clause below and flag terms unfavourable to the Customer:",
            "Review these agreement clauses for compliance with banking regulation:")


def _contract(ask: str, clauses: tuple[str, ...], start: int) -> str:
    rotated = clauses[start:] + clauses[:start]
    return ask + "\n" + "\n".join(rotated)


QUERIES: tuple[Query, ...] = (
    *(Query(_contract(a, _CLAUSES_ZH, i), "contract", "zh") for i, a in enumerate(_ASKS_ZH)),
    *(Query(_contract(a, _CLAUSES_EN, i + 2), "contract", "en") for i, a in enumerate(_ASKS_EN)),
    Query("工单分类：客户反映信用卡被重复扣款两次，要求退款。", "ticket", "zh"),
    Query("工单分类：紧急！客户账户被冻结，无法转账发工资，请立即处理。", "ticket", "zh"),
    Query("工单分类：客户投诉手机银行登录后页面空白。", "ticket", "zh"),
    Query("工单分类：紧急 客户称收到可疑短信后资金被盗刷。", "ticket", "zh"),
    Query("Classify this support ticket: customer cannot reset the password for online banking.", "ticket", "en"),
    Query("Classify this support ticket: URGENT - customer's payroll transfer failed twice today.", "ticket", "en"),
    Query("请解释这段 Python 代码的作用并找出 bug：\n```python\ndef avg(xs):\n    return sum(xs) / len(xs)\n"
          "print(avg([]))\n```", "code", "zh"),
    Query("帮我写一个 SQL 查询：统计每个分行上月的交易笔数，代码要能在 PostgreSQL 运行。", "code", "zh"),
    Query("Why does this function return None?\n```python\ndef find(items, key):\n    for i in items:\n"
          "        if i == key:\n            print(i)\n```", "code", "en"),
    Query("Refactor this JavaScript code to use async/await:\n```js\nfetch(url).then(r => r.json())"
          ".then(d => console.log(d));\n```", "code", "en"),
    Query("Write a Python function that parses an ISO 8601 date and returns the weekday.", "code", "en"),
    Query("求解方程 x^2 - 5x + 6 = 0，并写出计算过程。", "math", "zh"),
    Query("计算定积分 ∫_0^1 x e^x dx 的值。", "math", "zh"),
    Query("一笔本金 10000 元的贷款，年利率 4.2%，按月复利计算三年后的本息合计是多少？", "math", "zh"),
    Query("Solve the equation 3x + 7 = 25 and explain each step.", "math", "en"),
    Query("What is the probability of rolling two dice and getting a sum of 8?", "math", "en"),
    Query("Compute the derivative of f(x) = x^3 * ln(x).", "math", "en"),
    Query("你好，今天心情不太好，能陪我聊聊天吗？", "chat", "zh"),
    Query("推荐几本适合周末阅读的小说吧。", "chat", "zh"),
    Query("用一句话介绍一下你自己。", "chat", "zh"),
    Query("Hello! Can you recommend a good movie for tonight?", "chat", "en"),
    Query("Tell me a fun fact about octopuses.", "chat", "en"),
    Query("How are you doing today?", "chat", "en"),
)

ANSWERS: dict[QueryClass, dict[Lang, tuple[str, ...]]] = {
    "contract": {
        "zh": ("一、付款条款：违约金按日计收，建议约定上限。", "二、保密条款：应明确数据出境与第三方披露的例外。",
               "三、不可抗力：通知期限较短，需补充证明材料的提交方式。", "四、赔偿责任：律师费纳入赔偿范围。",
               "五、续期安排：自动续期无次数限制，建议增加终止权。", "六、争议解决：管辖约定明确，符合监管要求。"),
        "en": ("Payment: the 1.5% monthly interest is high; consider a cap.",
               "Data protection: the 72-hour breach notice is in line with regulation.",
               "Force majeure: the ten-day notice period should name a form.",
               "Liability: the cap excludes confidentiality breaches, which favours the Customer.",
               "Renewal: sixty days' notice is long; track the date.", "Disputes: the arbitration seat is clear."),
    },
    "ticket": {
        "zh": ("分类：账户与支付。", "优先级：高。", "建议转交：风控与清算团队。", "处理建议：先核实身份再冻结交易。",
               "回复客户：已受理，将在两小时内回电。"),
        "en": ("Category: account access.", "Priority: high.", "Route to: payments operations.",
               "Next step: verify identity, then reset the credential.", "Reply: we are on it and will call back."),
    },
    "code": {
        "zh": ("问题在于空列表时 len(xs) 为 0，会触发除零错误。", "修复：先判断输入是否为空再计算。",
               "```python\ndef avg(xs):\n    return sum(xs) / len(xs) if xs else 0.0\n```",
               "建议为边界情况补充单元测试。", "时间复杂度为 O(n)。"),
        "en": ("The function prints instead of returning, so the caller gets None.", "Fix: return the value.",
               "```python\ndef find(items, key):\n    return next((i for i in items if i == key), None)\n```",
               "Add a unit test for the empty case.", "The loop is O(n) in the number of items."),
    },
    "math": {
        "zh": ("解：因式分解得 (x-2)(x-3)=0。", "所以 x=2 或 x=3。", "用分部积分法可得结果为 1。",
               "按月复利：本息合计约为 11343 元。", "验算：代入原式成立。"),
        "en": ("Subtract 7 from both sides: 3x = 18.", "Divide by 3: x = 6.",
               "There are 5 outcomes out of 36, so p = 5/36.", "By the product rule, f'(x) = 3x^2 ln(x) + x^2.",
               "Check: substituting back works."),
    },
    "chat": {
        "zh": ("你好！很高兴和你聊天。", "如果愿意，可以说说今天发生了什么。", "推荐《活着》和《三体》，都值得一读。",
               "我是 RouteLens 模拟器里的一个助手。", "祝你周末愉快！"),
        "en": ("Hi there, happy to help!", "You might enjoy a classic like Casablanca.",
               "Octopuses have three hearts.", "I'm doing well, thanks for asking.", "Have a lovely evening!"),
    },
}

_KEYWORDS: dict[QueryClass, tuple[str, ...]] = {
    "contract": ("合同", "条款", "协议", "违约", "监管", "法规", "甲方", "乙方", "clause", "contract", "agreement",
                 "regulation", "liability", "indemn"),
    "ticket": ("工单", "客户", "投诉", "紧急", "退款", "冻结", "ticket", "urgent", "complaint", "refund", "customer"),
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


def compose_answer(prompt: str, rng: random.Random, limit: int) -> Answer:
    """Compose an on-topic answer to ``prompt`` from the canned fragments of its class and language.

    Args:
        prompt: The text the answer is about (the last user message).
        rng: Chooses fragments and length; seed it from the request for deterministic answers.
        limit: Most tokens the answer may have; a longer one is cut and finishes with ``length``.

    Returns:
        The answer.
    """
    cls, lang = classify(prompt), detect_lang(prompt)
    fragments = list(ANSWERS[cls][lang])
    rng.shuffle(fragments)
    target = rng.randint(*_TARGET_TOKENS[cls])
    sep = "" if lang == "zh" else " "
    parts: list[str] = []
    while estimate_tokens(sep.join(parts)) < target:
        parts.append(fragments[len(parts) % len(fragments)])
    text = sep.join(parts)
    finish: Literal["stop", "length"] = "stop"
    if estimate_tokens(text) > limit:
        text, finish = truncate_tokens(text, max(limit, 0)), "length"
    pieces = tuple(text[i : i + _PIECE_CHARS] for i in range(0, len(text), _PIECE_CHARS))
    return Answer(text, estimate_tokens(text), finish, tuple((p, estimate_tokens(p)) for p in pieces))
