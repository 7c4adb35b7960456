"""The policy step of a trace: which routing rule applied and why, the intent, keywords, attachments.

Never the prompt: clause details name features and their values, keyword matches name the
configured pattern, attachments their detected type and size.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.common import ContractModel

__all__ = ["AttachmentInfo", "ClauseTried", "IntentVerdict", "KeywordMatch", "PolicyStep"]


class ClauseTried(ContractModel):
    """One rule tried, in order: matched or not, and each atom's verdict with the values it read."""

    rule: str
    matched: bool
    detail: list[str] = []


class IntentVerdict(ContractModel):
    """The semantic intent: the nearest route, or an abstention below the route set's threshold."""

    label: str | None = Field(description="The route; None when the classifier abstained.")
    nearest: str | None = Field(None, description="The nearest route, also when abstained.")
    confidence: float = Field(ge=0, le=1)
    threshold: float | None = Field(None, ge=0, le=1, description="The calibrated abstain threshold.")
    abstained: bool = False
    path: Literal["fast", "early", "embedding", "rules"] = Field(
        "fast", description="What gave it: fast (character n-grams), early (MiniLM's first layers), embedding (all "
                            "of MiniLM), rules.")
    cut_tokens: int | None = Field(None, ge=0, description="Input was cut at this many tokens (None: not cut).")
    waited_s: float | None = Field(
        None, ge=0, description="Seconds the query waited for the classifier's first fit (a gateway just started: "
        "no path accepts before it), then to be classified (None: it did not wait).")


class KeywordMatch(ContractModel):
    """One configured keyword pattern that matched, with its weight."""

    pattern: str
    weight: float


class AttachmentInfo(ContractModel):
    """One attachment: where it was, what it claimed to be and what its bytes are."""

    message: int = Field(ge=0)
    part: int = Field(ge=0)
    declared: str | None = Field(None, description="The declared MIME type or file name extension.")
    detected: str | None = Field(None, description="The type its bytes show (None: not recognised).")
    bytes: int = Field(ge=0)
    mismatch: bool = False


class PolicyStep(ContractModel):
    """What the routing policy concluded for one request."""

    policy: str = Field(description="The policy file and its content hash.")
    rule: str | None = Field(None, description="The rule that matched (None: none did).")
    tried: list[ClauseTried] = []
    target: str | None = Field(None, description="The rule's primary target (None: every model).")
    chain: list[str] = Field(default=[], description="The rule's fallback chain, in order.")
    chain_used: list[str] = Field(default=[], description="Targets actually attempted, in order.")
    throttled: Literal["chain", "reject", "wait"] | None = Field(
        None, description="What the rule's throttle did with this request (None: it had a token).")
    waited_s: float | None = Field(
        None, ge=0, description="Seconds the request queued for a token of its rule's throttle (overflow: wait), "
                                "whether one came (throttled wait) or max_wait ran out first (throttled reject); "
                                "None: it did not wait.")
    intent: IntentVerdict | None = None
    keywords: list[KeywordMatch] = []
    keyword_score: float | None = None
    attachments: list[AttachmentInfo] = []
