import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router_core.decide.analysis import analyse_request, count_cjk_latin
from router_core.errors import InvalidRequest
from schemas.common import Language


def test_features_of_a_chinese_request() -> None:
    body = {"model": "auto", "messages": [{"role": "system", "content": "You are helpful."},
                                          {"role": "user", "content": "请分析合同第三条的违约责任"}]}
    a = analyse_request(body)
    f = a.features
    assert f.requested_model == "auto" and f.n_messages == 2
    assert f.language is Language.MIXED or f.language is Language.ZH
    assert a.query_text == "请分析合同第三条的违约责任"
    assert f.est_input_tokens >= 13  # one per CJK character at least
    assert not f.truncated


def test_the_query_is_the_last_user_message_of_a_conversation() -> None:
    body = {"messages": [{"role": "user", "content": "first question"}, {"role": "assistant", "content": "answer"},
                         {"role": "user", "content": "follow-up"}, {"role": "assistant", "content": None}]}
    assert analyse_request(body).query_text == "follow-up"
    assert analyse_request({"messages": [{"role": "system", "content": "only a prompt"}]}).query_text == ""


@pytest.mark.parametrize(("text", "lang"), [("classify this ticket", Language.EN), ("紧急：退款失败", Language.ZH)])
def test_language_detection(text: str, lang: Language) -> None:
    assert analyse_request({"messages": [{"role": "user", "content": text}]}).features.language is lang


def test_long_input_is_cut_and_extrapolated() -> None:
    a = analyse_request({"messages": [{"role": "user", "content": "word " * 10_000}]}, max_chars=1000)
    assert a.features.truncated and a.features.analysed_chars == 1000
    assert a.features.input_chars == 50_000
    assert a.features.est_input_tokens == pytest.approx(12_500, rel=0.01)


def test_content_parts_and_attachments() -> None:
    body = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is in this image?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}]}]}
    a = analyse_request(body)
    assert a.features.has_attachments and a.query_text == "what is in this image?"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ([], None),
        ({"model": "auto"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"content": "hi"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": 3, "messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"max_tokens": -1, "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
    ],
)
def test_bad_requests_raise_with_param(body: object, param: str | None) -> None:
    with pytest.raises(InvalidRequest) as info:
        analyse_request(body)
    assert info.value.param == param


@pytest.mark.parametrize(("text", "cls"), [
    ("请分析合同第三条的违约责任", "contract"),
    ("Review clause 7.2 of this agreement for indemnification", "contract"),
    ("紧急：我的退款失败了", "ticket"),
    ("def add(a, b):\n    return a + b", "code"),
    ("solve 3x + 5 = 20", "math"),
    ("hello, how are you?", "chat"),
])
def test_rule_scored_intent(text: str, cls: str) -> None:
    a = analyse_request({"messages": [{"role": "user", "content": text}]})
    assert a.intent.cls == cls
    assert 0 < a.intent.confidence <= 1


def _counted_one_by_one(text: str) -> tuple[int, int]:
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf")
    return cjk, sum(1 for ch in text if ch.isascii() and ch.isalpha())


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=0, max_size=40), st.integers(min_value=1, max_value=20))
def test_cjk_and_latin_counts_match_a_character_loop_on_short_and_long_texts(piece: str, times: int) -> None:
    # repeated past the short-text cut-over (256 characters), so both ways of counting are checked
    text = piece * times + "边界 Edge \u3400\u4dbf\u4e00\u9fff\u4dc0 Zz@[`{" * (times * 3)
    assert count_cjk_latin(text) == _counted_one_by_one(text)
    assert count_cjk_latin(piece) == _counted_one_by_one(piece)


@pytest.mark.parametrize("role", [{}, [], 3, None, "robot"])
def test_a_role_that_is_not_one_of_the_names_is_a_400_not_a_crash(role: object) -> None:
    # schemathesis found {"role": {}} reaching a set lookup: unhashable, a 500 with a traceback
    with pytest.raises(InvalidRequest, match=r"messages\[0\] must be an object with a valid 'role'"):
        analyse_request({"model": "auto", "messages": [{"role": role, "content": None}]})
