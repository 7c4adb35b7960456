"""Query normalisation and hashing: the only form in which a query is ever kept.

The raw text of a query never reaches a store or a log. What is kept is the SHA-256 of its
normalised form, written ``sha256:<hex>``, or an HMAC-SHA256 under a secret key, written
``hmac-sha256:<hex>``, so that equal queries can be grouped without being readable.
"""

from __future__ import annotations

import hashlib
import hmac
import unicodedata

__all__ = ["normalize_query", "query_hash"]

# Full-width ASCII variants (U+FF01..U+FF5E) map onto ASCII (U+0021..U+007E); the ideographic
# space U+3000 becomes a plain space. Done explicitly rather than by NFKC so that nothing else
# (ligatures, circled digits, half-width katakana) changes meaning behind the caller's back.
_FULL_TO_HALF = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_FULL_TO_HALF[0x3000] = 0x20


def normalize_query(text: str) -> str:
    """Return the canonical form of ``text`` that query hashes are computed over.

    Steps: Unicode NFC composition, full-width to half-width folding, lower-casing, trimming,
    and collapsing every run of whitespace (any Unicode space) into one ASCII space.

    Args:
        text: The query as the user wrote it.

    Returns:
        The normalised query.
    """
    folded = unicodedata.normalize("NFC", text).translate(_FULL_TO_HALF).lower()
    return " ".join(folded.split())


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
