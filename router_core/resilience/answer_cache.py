"""A short-lived cache of recent answers, for the ``cache`` degraded step (seed 000: cached answers).

Memory only, bounded, with a TTL, and off unless ``economics.degraded.cache.enabled``: a cached
answer is never written anywhere (the trace records only that the cache answered). Keys are the
hash of the requested model, the normalised query (NFKC, case-folded, whitespace collapsed) and
what else shapes the answer (``context``: the gateway's digest of the turns before the question,
system prompt included, and the answer's format), so the same words in another conversation or
under another system prompt never get this one's answer.
"""

from __future__ import annotations

import hashlib
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from schemas.config.economics import AnswerCacheSettings
from schemas.hashing import query_hash

__all__ = ["AnswerCache", "answer_context", "normalise"]


def normalise(text: str) -> str:
    """The form two queries that mean the same text share."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def answer_context(body: dict[str, Any]) -> str:
    """What shapes a chat request's answer besides its question, as a digest for :meth:`AnswerCache.key`.

    The turns before the last message (the system prompt and the conversation so far), the
    answer's format and count; the question itself is the key's normalised query.
    """
    messages = body.get("messages")
    earlier = messages[:-1] if isinstance(messages, list) else None
    return hashlib.sha256(orjson.dumps([earlier, body.get("response_format"), body.get("n")],
                                       option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()


class AnswerCache:
    """Recent non-streamed 200 answers by normalised query hash; LRU beyond ``max_entries``."""

    def __init__(self, settings: AnswerCacheSettings, *, clock: Callable[[], float] = time.monotonic,
                 hash_key: str | None = None) -> None:
        self.settings = settings
        self._clock = clock
        self._hash_key = hash_key
        self._items: OrderedDict[str, tuple[bytes, str, float]] = OrderedDict()
        self.hits = 0

    @property
    def is_enabled(self) -> bool:
        """True when configured on."""
        return self.settings.enabled

    def key(self, model: str, query_text: str, body: dict[str, Any] | None = None) -> str | None:
        """The cache key of a query in its request ``body``'s context (:func:`answer_context`; None: off)."""
        if not self.settings.enabled:
            return None
        context = "" if body is None else answer_context(body)
        return query_hash(model + "\x00" + normalise(query_text) + "\x00" + context, self._hash_key)

    def put(self, key: str, payload: bytes, content_type: str) -> None:
        """Keep an answer for ``ttl_s``."""
        self._items[key] = (payload, content_type, self._clock() + self.settings.ttl_s)
        self._items.move_to_end(key)
        while len(self._items) > self.settings.max_entries:
            self._items.popitem(last=False)

    def get(self, key: str) -> tuple[bytes, str] | None:
        """The answer kept under ``key``, if it has not expired."""
        item = self._items.get(key)
        if item is None:
            return None
        if item[2] <= self._clock():
            del self._items[key]
            return None
        self.hits += 1
        return item[0], item[1]

    def __len__(self) -> int:
        return len(self._items)
