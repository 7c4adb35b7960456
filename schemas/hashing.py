"""Query normalisation and hashing: the only form in which a query is ever kept.

The raw text of a query never reaches a store or a log. What is kept is the SHA-256 of its
normalised form, written ``sha256:<hex>``, or an HMAC-SHA256 under a secret key, written
``hmac-sha256:<hex>``, so that equal queries can be grouped without being readable.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata

__all__ = ["normalize_query", "query_hash"]

# Full-width ASCII variants (U+FF01..U+FF5E) map onto ASCII (U+0021..U+007E); the ideographic
# space U+3000 becomes a plain space. Done explicitly rather than by NFKC so that nothing else
# (ligatures, circled digits, half-width katakana) changes meaning behind the caller's back.
_FULL_TO_HALF: dict[int, int | str] = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_FULL_TO_HALF[0x3000] = 0x20
# Seed 003 §4.1 ("统一标点符号"): the punctuation that full-width folding leaves, as its ASCII form.
_FULL_TO_HALF.update({ord(k): v for k, v in {
    "。": ".", "、": ",", "“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'", "「": '"', "」": '"',
    "『": '"', "』": '"', "【": "[", "】": "]", "〔": "(", "〕": ")", "《": "<", "》": ">", "〈": "<", "〉": ">",
    "…": "...", "–": "-", "—": "-", "～": "~",
}.items()})
_FOLDED = {chr(k): v if isinstance(v, str) else chr(v) for k, v in _FULL_TO_HALF.items()}
_FOLDABLE = re.compile("[" + "".join(map(re.escape, _FOLDED)) + "]")
# Whitespace between two characters of a script written without spaces (Han, kana): "年 报" is "年报".
_NO_SPACE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


def normalize_query(text: str) -> str:
    """Return the canonical form of ``text`` that query hashes are computed over.

    Steps: Unicode NFC composition, full-width to half-width folding, CJK punctuation and curly
    quotes to their ASCII forms, lower-casing, trimming, collapsing every run of whitespace (any
    Unicode space) into one ASCII space, and dropping that space between two Han or kana
    characters (seed 003: "年报" and "年 报" hash the same; Korean, written with spaces, keeps them).

    Args:
        text: The query as the user wrote it.

    Returns:
        The normalised query.
    """
    if text.isascii():  # nothing to compose or fold
        return " ".join(text.lower().split())
    composed = unicodedata.normalize("NFC", text)
    folded = _FOLDABLE.sub(lambda m: _FOLDED[m.group()], composed).lower()  # 3x str.translate's speed on CJK
    words = folded.split()
    if len(words) < 2:
        return " ".join(words)
    cjk = _NO_SPACE.fullmatch
    out = [words[0]]
    for word in words[1:]:  # one look at each space's two sides
        out.append(word if cjk(out[-1][-1]) and cjk(word[0]) else " " + word)
    return "".join(out)


def query_hash(text: str, key: str | bytes | None = None) -> str:
    """Hash a query after :func:`normalize_query`.

    Args:
        text: The raw query text. It is not kept.
        key: Optional secret. With a key the digest is HMAC-SHA256, so that the hashes of short,
            guessable queries cannot be reversed by hashing candidates.

    Returns:
        ``sha256:<64 hex>`` or, with a key, ``hmac-sha256:<64 hex>``.
    """
    data = normalize_query(text).encode("utf-8")
    if key is None:
        return "sha256:" + hashlib.sha256(data).hexdigest()
    secret = key.encode("utf-8") if isinstance(key, str) else key
    return "hmac-sha256:" + hmac.new(secret, data, hashlib.sha256).hexdigest()
