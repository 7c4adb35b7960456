"""Bound the classifier's input: cut at ``max_tokens`` estimated tokens.

Tokens are estimated as :func:`router_core.decide.analysis.estimate_tokens` does: about one per CJK
character and one per four other characters.
"""

from __future__ import annotations

__all__ = ["cut_to_tokens"]


def _is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf"


def cut_to_tokens(text: str, max_tokens: int) -> tuple[str, int | None]:
    """Return ``(text, None)`` when it fits, else ``(prefix, max_tokens)``, the prefix within the bound.

    Args:
        text: The query text.
        max_tokens: The bound (estimated tokens), > 0.
    """
    if len(text) <= max_tokens:  # each character costs at most one token
        return text, None
    cjk = other = 0
    for i, ch in enumerate(text):
        if _is_cjk(ch):
            cjk += 1
        else:
            other += 1
        if cjk + (other + 3) // 4 > max_tokens:
            return text[:i], max_tokens
    return text, None
