"""The corpus itself: queries with their ground truth, and the filler each class answers with.

Written for RouteLens. Every query carries ``fact``, the sentence a correct answer states, and
``wrong``, the plausible mistake an incorrect answer states instead; fillers never contain either,
so a grader can tell a right answer from a wrong one and, by its vocabulary, an on-topic answer
from a drifted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from schemas.config.probes import SEED_SUMMARY_PROMPT
from schemas.config.sim import QueryClassName

__all__ = ["ANSWERS", "CLASSES", "FOLLOW_UPS", "QUERIES", "REFERENCE_DRIFT", "REFERENCE_PARAPHRASES", "Lang", "Query",
           "QueryClass"]

QueryClass = QueryClassName
Lang = Literal["zh", "en"]
CLASSES: tuple[QueryClass, ...] = ("contract", "ticket", "code", "math", "chat")


@dataclass(frozen=True, slots=True)
class Query:
    """One corpus query: text, traffic class, language, and the facts a right and a wrong answer state."""

    text: str
    cls: QueryClass
    lang: Lang
    fact: str = ""
    wrong: str = ""


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


def _contract(ask: str, clauses: tuple[str, ...], start: int) -> str:
    return ask + "\n" + "\n".join(clauses[start:] + clauses[:start])


def _q(text: str, cls: QueryClass, lang: Lang, fact: str, wrong: str) -> Query:
    return Query(text, cls, lang, fact, wrong)


QUERIES: tuple[Query, ...] = (
    _q(_contract("请逐条分析以下合同条款的法律风险，并指出对甲方不利之处：", _CLAUSES_ZH, 0), "contract", "zh",
       "风险结论：逾期违约金按日万分之五计收，对甲方不利。", "风险结论：本合同未约定任何违约责任。"),
    _q(_contract("根据相关监管法规，审查下列条款是否合规：", _CLAUSES_ZH, 1), "contract", "zh",
       "合规结论：客户信息处理条款符合金融监管要求。", "合规结论：本合同无需遵守任何监管法规。"),
    _q(_contract("请概括以下协议中违约责任与争议解决的安排：", _CLAUSES_ZH, 2), "contract", "zh",
       "概括：违约方赔偿直接损失及律师费，争议由甲方所在地法院管辖。", "概括：争议须提交境外仲裁机构解决。"),
    _q(_contract("Analyse the legal risk of each contract clause below and flag terms unfavourable to the Customer:",
                 _CLAUSES_EN, 2), "contract", "en",
       "Risk finding: the 1.5% monthly late interest is unfavourable to the Customer.",
       "Risk finding: the agreement contains no late-payment terms."),
    _q(_contract("Review these agreement clauses for compliance with banking regulation:", _CLAUSES_EN, 3),
       "contract", "en", "Compliance finding: the 72-hour breach notice meets banking regulation.",
       "Compliance finding: the Supplier may share personal data freely."),
    _q("工单分类：客户反映信用卡被重复扣款两次，要求退款。", "ticket", "zh", "分类：支付与退款。", "分类：账户登录。"),
    _q("工单分类：紧急！客户账户被冻结，无法转账发工资，请立即处理。", "ticket", "zh", "分类：账户冻结（紧急）。",
       "分类：信用卡积分。"),
    _q("工单分类：客户投诉手机银行登录后页面空白。", "ticket", "zh", "分类：手机银行故障。", "分类：支付与退款。"),
    _q("工单分类：紧急 客户称收到可疑短信后资金被盗刷。", "ticket", "zh", "分类：欺诈盗刷（紧急）。",
       "分类：手机银行故障。"),
    _q("Classify this support ticket: customer cannot reset the password for online banking.", "ticket", "en",
       "Category: account access.", "Category: card dispute."),
    _q("Classify this support ticket: URGENT - customer's payroll transfer failed twice today.", "ticket", "en",
       "Category: payments (urgent).", "Category: account access."),
    _q("请解释这段 Python 代码的作用并找出 bug：\n```python\ndef avg(xs):\n    return sum(xs) / len(xs)\n"
       "print(avg([]))\n```", "code", "zh", "空列表会触发 ZeroDivisionError。", "这段代码没有任何问题。"),
    _q("帮我写一个 SQL 查询：统计每个分行上月的交易笔数，代码要能在 PostgreSQL 运行。", "code", "zh",
       "SELECT branch_id, COUNT(*) FROM transactions GROUP BY branch_id;", "SELECT * FROM transactions LIMIT 1;"),
    _q("Why does this function return None?\n```python\ndef find(items, key):\n    for i in items:\n"
       "        if i == key:\n            print(i)\n```", "code", "en",
       "The function prints instead of returning the match.", "The loop never runs because items is a list."),
    _q("Refactor this JavaScript code to use async/await:\n```js\nfetch(url).then(r => r.json())"
       ".then(d => console.log(d));\n```", "code", "en",
       "const data = await (await fetch(url)).json();", "Use a synchronous XMLHttpRequest instead."),
    _q("Write a Python function that parses an ISO 8601 date and returns the weekday.", "code", "en",
       "return date.fromisoformat(s).strftime('%A')", "return time.sleep(s)"),
    _q("求解方程 x^2 - 5x + 6 = 0，并写出计算过程。", "math", "zh", "解得 x=2 或 x=3。", "解得 x=1 或 x=6。"),
    _q("计算定积分 ∫_0^1 x e^x dx 的值。", "math", "zh", "定积分的值为 1。", "定积分的值为 e。"),
    _q("一笔本金 10000 元的贷款，年利率 4.2%，按月复利计算三年后的本息合计是多少？", "math", "zh",
       "本息合计约 11340.33 元。", "本息合计约 11260.00 元。"),
    _q("Solve the equation 3x + 7 = 25 and explain each step.", "math", "en", "So x = 6.", "So x = 8."),
    _q("What is the probability of rolling two dice and getting a sum of 8?", "math", "en",
       "The probability is 5/36.", "The probability is 1/6."),
    _q("Compute the derivative of f(x) = x^3 * ln(x).", "math", "en",
       "f'(x) = 3x^2 ln(x) + x^2.", "f'(x) = 3x^2 / x."),
    _q("你好，今天心情不太好，能陪我聊聊天吗？", "chat", "zh", "我愿意陪你聊聊。", "我无法回答这个问题。"),
    _q("推荐几本适合周末阅读的小说吧。", "chat", "zh", "推荐《活着》和《三体》。", "推荐你周末去加班。"),
    _q("用一句话介绍一下你自己。", "chat", "zh", "我是 RouteLens 模拟器里的一个助手。", "我是一名人类客服。"),
    _q("Hello! Can you recommend a good movie for tonight?", "chat", "en",
       "Try Casablanca tonight.", "I cannot recommend anything."),
    _q("Tell me a fun fact about octopuses.", "chat", "en", "Octopuses have three hearts.",
       "Octopuses have one heart."),
    _q("How are you doing today?", "chat", "en", "I'm doing well, thanks for asking.", "I do not understand."),
)

# Filler per class and language: on-topic vocabulary, never a fact or a wrong fact of any query.
ANSWERS: dict[QueryClass, dict[Lang, tuple[str, ...]]] = {
    "contract": {
        "zh": ("一、付款条款：建议为违约金约定上限。", "二、保密条款：应明确第三方披露的例外。",
               "三、不可抗力条款：需补充证明材料的提交方式。", "四、赔偿条款：赔偿范围应写明计算方法。",
               "五、续期条款：建议增加单方终止权。", "六、以上合同条款分析仅供参考。"),
        "en": ("Payment clause: consider a cap on late charges.", "Data clause: name the exceptions to disclosure.",
               "Force majeure clause: the notice should name a form.",
               "Liability clause: state how losses are measured.",
               "Renewal clause: track the notice date.", "This contract review is for reference only."),
    },
    "ticket": {
        "zh": ("工单已受理。", "优先级：高。", "建议转交对应的客户服务团队。", "处理建议：先核实客户身份。",
               "回复客户：工单将在两小时内回电。"),
        "en": ("Ticket received.", "Priority: high.", "Route to the customer operations team.",
               "Next step: verify the customer's identity.", "Reply: this ticket gets a call back within two hours."),
    },
    "code": {
        "zh": ("下面是修改后的代码思路。", "建议为边界情况补充单元测试代码。", "这段代码的时间复杂度为 O(n)。",
               "注意代码中的异常处理。", "可以用 python 的类型注解让代码更清楚。"),
        "en": ("Here is how to fix the code.", "Add a unit test for the edge case in this code.",
               "This code runs in O(n) time.", "Mind the error handling in this function.",
               "Type hints make the python code clearer."),
    },
    "math": {
        "zh": ("计算过程如下。", "先整理方程，再逐步求解。", "验算：代入原式计算成立。", "注意计算中的单位与精度。",
               "以上为完整的求解步骤。"),
        "en": ("Let us solve it step by step.", "First simplify the equation.", "Check: substituting back works.",
               "Compute carefully and keep the units.", "That completes the solution."),
    },
    "chat": {
        "zh": ("你好！很高兴和你聊天。", "如果愿意，可以说说今天发生了什么。", "祝你周末愉快！",
               "有什么想聊的都可以告诉我。", "希望你今天过得开心。"),
        "en": ("Hi there, happy to help!", "I hope your day goes well.", "Have a lovely evening!",
               "Feel free to tell me more.", "Thanks for the chat."),
    },
}

# Later turns of a multi-turn session: no facts of their own, so the answer stays on the first turn's topic.
FOLLOW_UPS: dict[Lang, tuple[str, ...]] = {
    "zh": ("请继续，并给出最终结论。", "补充说明：客户已经等了两天，请尽快。", "请再确认一遍结论。"),
    "en": ("Please go on and give the final answer.", "Update: the customer has waited two days.",
           "Please double-check the conclusion."),
}

# The semantic probe's reference prompts (probes/references.yaml): a healthy instance answers each
# with one of these paraphrases of its reference answer; a drifting one with fluent off-topic text.
REFERENCE_PARAPHRASES: dict[str, tuple[str, ...]] = {
    SEED_SUMMARY_PROMPT: (
        "人工智能是计算机科学的一个分支，旨在了解智能的实质并制造出能像人类一样做出反应的智能机器。",
        "人工智能作为计算机科学的分支，试图理解智能的本质，并创造能以类似人类智能的方式做出反应的机器。",
        "人工智能是计算机科学的一支，它探索智能的实质，目标是造出能像人一样思考和反应的智能机器。",
        "简言之，人工智能是研究智能本质、并制造能以人类智能相似方式做出反应的机器的计算机科学分支。",
    ),
    "请用一句话解释：什么是光合作用？": (
        "光合作用是绿色植物利用光能把二氧化碳和水转化为有机物并释放氧气的过程。",
        "光合作用指绿色植物在阳光下把二氧化碳和水合成有机物，同时放出氧气的过程。",
        "绿色植物借助光能，将二氧化碳和水变成糖类等有机物并释放氧气，这就是光合作用。",
        "光合作用是植物利用太阳光，把水和二氧化碳转化为养分并放出氧气的过程。",
    ),
    "请用一句话说明：为什么要定期备份数据？": (
        "定期备份数据可以在设备故障、误删或遭受攻击时恢复重要信息，避免损失。",
        "定期备份能让我们在硬盘损坏、误删除或勒索攻击后找回重要数据，减少损失。",
        "因为设备会坏、文件会被误删或被攻击，定期备份可以保证重要数据能够恢复。",
        "定期备份数据是为了在故障、误操作或病毒攻击发生时还能恢复资料，不至于丢失。",
    ),
    "In one sentence, what is photosynthesis?": (
        "Photosynthesis is the process by which green plants use sunlight to turn carbon dioxide and water "
        "into sugar and release oxygen.",
        "Photosynthesis is how plants use light energy to convert water and carbon dioxide into glucose, "
        "giving off oxygen.",
        "In photosynthesis, green plants capture sunlight and make sugars from carbon dioxide and water, "
        "releasing oxygen as a by-product.",
        "It is the process in which plants turn sunlight, water and carbon dioxide into food and oxygen.",
    ),
    "In one sentence, why should you back up your data regularly?": (
        "Regular backups let you recover important files after a disk failure, accidental deletion or "
        "ransomware attack.",
        "Backing up regularly means you can restore your data if a drive fails, you delete something by "
        "mistake, or malware strikes.",
        "You should back up often so that lost or corrupted files can be recovered after hardware failure "
        "or an attack.",
        "Frequent backups protect your important data against disk crashes, accidental deletion and ransomware.",
    ),
    "In one sentence, what does an HTTP 404 status code mean?": (
        "A 404 status code means the server could not find the requested resource.",
        "HTTP 404 means the server was reached but the page or resource you asked for does not exist.",
        "A 404 response tells the client that the requested URL was not found on the server.",
        "Status 404 Not Found means the server cannot locate the resource at the requested address.",
    ),
}

# What a drifted instance says instead: fluent, in the prompt's language, about something else.
REFERENCE_DRIFT: dict[Lang, tuple[str, ...]] = {
    "zh": ("今天下午的足球比赛在最后一分钟打进点球，双方最终握手言和。",
           "这道红烧肉要先焯水，再加冰糖和酱油小火慢炖一个小时。",
           "周末我们沿着湖边的步道散步，还在山脚下的小店喝了杯热茶。",
           "这部电影的配乐非常动人，结尾的长镜头让很多观众落泪。",
           "明天北方大部分地区将迎来降温，出门记得多穿一件外套。",
           "这家书店新开了儿童绘本区，周日上午还有讲故事活动。"),
    "en": ("The match ended in a draw after a penalty in the final minute of the second half.",
           "Brown the onions slowly, then add the tomatoes and let the sauce simmer for twenty minutes.",
           "We hiked along the lake shore and stopped for tea at a small cabin below the pass.",
           "The film's soundtrack is moving, and its final long take left the audience in tears.",
           "Tomorrow will be colder across the north, so take a warm coat if you go out.",
           "The bookshop opened a new children's corner and hosts a story hour on Sunday mornings."),
}
