"""What a policy condition may read about one request: features only, and the prompt in memory.

The prompt is inspected by ``prompt_contains`` and term-list functions while the decision runs; it
never leaves this object (the trace gets the query hash, the features and the clauses' verdicts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["RequestView"]


@dataclass(frozen=True, slots=True)
class RequestView:
    """The request as conditions see it.

    Attributes:
        input_length: Estimated input tokens of the whole conversation (``input_length``).
        query_length: Estimated tokens of the last user message (``query_length``).
        language: ``zh``, ``en``, ``mixed`` or ``unknown``.
        intent: The request's intent label (None: abstained or unknown).
        intent_confidence: Its confidence in [0, 1] (None when there is no intent).
        file_types: Types of the attachments as detected from their bytes (``pdf``, ``docx``,
            ``png``...), in message order; ``file_type`` is the first one.
        has_attachments: Whether any content part carries a file or an image.
        request_time: When the request arrived, in the policy's time zone
            (``request_time.hour``, ``request_time.weekday`` with Monday = 0).
        headers: Request headers, names lower-cased (``header('x-tenant')``).
        metadata: The request body's ``metadata`` object (``metadata.tier``).
        prompt: The last user message's text; read in memory only, never stored.
        keyword_score: The rule-enhanced keyword score (None when no keyword scoring is configured).
        fingerprint_key: The HMAC key of the fingerprints an explanation gives for header and
            ``metadata`` values it withholds (``router.hash_key_env``'s; None: plain SHA-256).
    """

    input_length: int
    query_length: int
    language: str
    intent: str | None
    intent_confidence: float | None
    file_types: tuple[str, ...]
    has_attachments: bool
    request_time: datetime
    headers: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    prompt: str = field(default="", repr=False)
    keyword_score: float | None = None
    fingerprint_key: bytes | None = field(default=None, repr=False)
    _folded: list[str] = field(default_factory=list, repr=False, compare=False)

    def folded_prompt(self) -> str:
        """The prompt casefolded, once per request (every rule tried matches against the same fold)."""
        if not self._folded:
            self._folded.append(self.prompt.casefold())
        return self._folded[0]
