"""The first line of defence (seed 000, 七级防御 #1): obviously malicious prompts, refused before analysis.

What it does: scans the text of every message (the first ``max_chars`` characters of it) for the
configured regular expressions (prompt-injection markers, ...), and for huge repetition: text of
``repetition.min_chars`` or more that zlib shrinks more than ``repetition.max_ratio`` times (a
normal prompt shrinks 2-4 times, a pasted block repeated a thousand times hundreds of times). A hit
is a :class:`Refusal` (400) naming the pattern; nothing is forwarded. Content the analysis would
refuse as malformed is left to it.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schemas.chat_text import MalformedContent, content_text
from schemas.config.shared import PrefilterSettings

__all__ = ["Prefilter", "Refusal", "prompt_text"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request refused before routing: its HTTP status, reason, OpenAI ``code`` and ``Retry-After``."""

    status: int
    message: str
    code: str
    param: str | None = None
    retry_after_s: float | None = None

    def headers(self) -> dict[str, str]:
        """``Retry-After`` (whole seconds, at least 1) when the refusal is a throttle's."""
        if self.retry_after_s is None:
            return {}
        return {"Retry-After": str(max(1, math.ceil(self.retry_after_s)))}


def prompt_text(body: Mapping[str, Any], max_chars: int) -> str:
    """The text of every message of a chat request, newline-joined, cut at ``max_chars``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    parts: list[str] = []
    size = 0
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        try:
            text, _ = content_text(msg.get("content"))
        except MalformedContent:
            continue
        parts.append(text)
        size += len(text) + 1
        if size >= max_chars:
            break
    return "\n".join(parts)[:max_chars]


class Prefilter:
    """Regular expressions and a repetition check over the prompt.

    Args:
        settings: ``throttles.prefilter`` (patterns compiled here, once).
    """

    def __init__(self, settings: PrefilterSettings) -> None:
        self.settings = settings
        self._patterns = [(p.name, re.compile(p.regex)) for p in settings.patterns]

    def check(self, body: Mapping[str, Any]) -> Refusal | None:
        """The refusal of ``body``, or None when it passes."""
        text = prompt_text(body, self.settings.max_chars)
        if not text:
            return None
        for name, pattern in self._patterns:
            if pattern.search(text):
                return Refusal(400, f"request refused by the prefilter: the prompt matches pattern {name!r}",
                               f"prefilter_{name.replace('-', '_')}", "messages")
        rep = self.settings.repetition
        if rep is not None and len(text) >= rep.min_chars:
            raw = text.encode()
            ratio = len(raw) / len(zlib.compress(raw, 1))
            if ratio > rep.max_ratio:
                return Refusal(400, f"request refused by the prefilter: the prompt is one text repeated "
                                    f"(it compresses {ratio:.0f}x, over {rep.max_ratio:g}x)",
                               "prefilter_repetition", "messages")
        return None
