"""Checks on ids typed or linked by a user, before anything is asked of the store."""

from __future__ import annotations

import unicodedata

__all__ = ["MAX_ID_CHARS", "request_id_problem"]

MAX_ID_CHARS = 128  # DecisionTrace.request_id's bound: a longer id cannot exist


def request_id_problem(request_id: str) -> str | None:
    """Why ``request_id`` cannot name a stored trace (too long, control characters), or None when it may.

    Quotes, slashes and any printable Unicode are allowed: the store is queried with parameters
    (and the id URL-quoted), so they simply find nothing.
    """
    if len(request_id) > MAX_ID_CHARS:
        return f"A request_id has at most {MAX_ID_CHARS} characters; this one has {len(request_id):,}."
    if any(unicodedata.category(ch) in ("Cc", "Cf") for ch in request_id):
        return "A request_id cannot contain control characters."
    return None
