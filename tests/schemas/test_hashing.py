import hashlib
import hmac

import pytest

from schemas.hashing import normalize_query, query_hash


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  Hello   World \n", "hello world"),
        ("ＡＢＣ　１２３", "abc 123"),
        ("帮我分析　这份合同的第３条", "帮我分析这份合同的第3条"),  # no space between Han characters
        ("年 报", "年报"),
        ("年报 PDF 第 3 条", "年报 pdf 第 3 条"),  # a space beside a letter or digit stays
        ("“年报”。「合同」、【附件】…", '"年报"."合同",[附件]...'),
        ("안녕 하세요", "안녕 하세요"),  # Korean is written with spaces
        ("ひらがな カタカナ", "ひらがなカタカナ"),
        ("‘quoted’ — dash", "'quoted' - dash"),
        ("年报\t\t PDF", "年报 pdf"),
        ("请问，这是什么？", "请问,这是什么?"),  # full-width punctuation folds too
        ("Cafe\u0301", "café"),  # decomposed accent composes (NFC)
        ("", ""),
    ],
)
def test_normalize_query(raw: str, expected: str) -> None:
    assert normalize_query(raw) == expected


def test_the_seeds_example_hashes_the_same() -> None:
    """Seed 003 §4.1: normalise before hashing, or "年报" and "年 报" group apart."""
    assert query_hash("年报") == query_hash("年 报") == query_hash(" 年　报 ")
    assert query_hash("请看“年报”。") == query_hash('请看"年报".')


def test_full_width_and_half_width_hash_the_same() -> None:
    assert query_hash("ＡＢＣ　１２３") == query_hash("ABC 123")
    assert query_hash("  年报   PDF ") == query_hash("年报 pdf")


def test_plain_hash_is_sha256_of_the_normalised_text() -> None:
    digest = hashlib.sha256(b"abc 123").hexdigest()
    assert query_hash("ABC  123") == f"sha256:{digest}"


def test_different_queries_hash_differently() -> None:
    assert query_hash("合同条款") != query_hash("工单分类")


def test_hmac_mode_uses_the_key() -> None:
    expected = hmac.new(b"s3cret", "年报 pdf".encode(), hashlib.sha256).hexdigest()
    assert query_hash("年报  PDF", key="s3cret") == f"hmac-sha256:{expected}"
    assert query_hash("年报  PDF", key=b"s3cret") == f"hmac-sha256:{expected}"
    assert query_hash("年报 PDF", key="other") != query_hash("年报 PDF", key="s3cret")
    assert query_hash("年报 PDF", key="s3cret").removeprefix("hmac-") != query_hash("年报 PDF")


def test_hash_never_contains_the_text() -> None:
    h = query_hash("my secret question", key="k")
    assert "secret" not in h and len(h.split(":")[1]) == 64


def test_every_folded_character_folds_as_the_table_says() -> None:
    from schemas.hashing import _FULL_TO_HALF

    for code, to in _FULL_TO_HALF.items():
        want = (to if isinstance(to, str) else chr(to)).lower()
        assert normalize_query(f"x{chr(code)}y") == f"x{want}y", hex(code)
