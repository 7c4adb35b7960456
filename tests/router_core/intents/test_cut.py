from router_core.decide.analysis import estimate_tokens
from router_core.intents.cut import cut_to_tokens


def test_short_text_is_not_cut() -> None:
    assert cut_to_tokens("hello world", 512) == ("hello world", None)


def test_long_english_is_cut_at_the_bound() -> None:
    text = "word " * 1000  # about 1250 tokens
    out, cut = cut_to_tokens(text, 512)
    assert cut == 512
    assert estimate_tokens(0, len(out)) <= 512 < estimate_tokens(0, len(out) + 1)


def test_cjk_counts_one_token_per_character() -> None:
    out, cut = cut_to_tokens("合同" * 400, 512)
    assert cut == 512 and len(out) == 512
