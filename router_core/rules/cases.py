"""A policy file's own test cases, and ``explain``: request features in, the rule matched and why out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC
from zoneinfo import ZoneInfo

from router_core.rules.ir import Match, RuleSet
from router_core.rules.request import RequestView
from schemas.config.attachments import normalise_type
from schemas.policy_file import CaseRequest, PolicyCase

__all__ = ["CaseResult", "explain", "run_cases", "view_of"]


def view_of(req: CaseRequest, timezone: str, key: bytes | None = None) -> RequestView:
    """The :class:`RequestView` a case's features describe, its time read in ``timezone``, keyed by ``key``.

    A case time without a zone is UTC (:class:`CaseRequest` makes it so; here too for one built
    without validation), never the machine's zone.
    """
    at = req.request_time
    when = (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).astimezone(ZoneInfo(timezone))
    return RequestView(
        input_length=req.input_length,
        query_length=req.input_length if req.query_length is None else req.query_length,
        language=str(req.language), intent=req.intent, intent_confidence=req.intent_confidence,
        file_types=tuple(normalise_type(t) for t in req.file_types),  # as the gateway types them: "PDF" is pdf
        has_attachments=bool(req.file_types) if req.has_attachments is None else req.has_attachments,
        request_time=when, headers={k.lower(): v for k, v in req.headers.items()}, metadata=req.metadata,
        prompt=req.prompt, keyword_score=req.keyword_score, fingerprint_key=key,
    )


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case: what it expected, what the policy did, and whether they agree."""

    case: PolicyCase
    match: Match

    @property
    def rule(self) -> str | None:
        """The rule that matched (None: none did)."""
        return None if self.match.rule is None else self.match.rule.name

    @property
    def target(self) -> str | None:
        """The matched rule's primary target."""
        return None if self.match.rule is None else self.match.rule.primary

    @property
    def passed(self) -> bool:
        """The rule is the expected one, and so is the target when the case names one."""
        want = self.case.expect
        if self.rule != want.rule:
            return False
        return "target" not in want.model_fields_set or self.target == want.target


def explain(rules: RuleSet, req: CaseRequest, key: bytes | None = None) -> Match:
    """Match one request's features, with every tried rule's atoms explained (withheld values keyed by ``key``)."""
    return rules.match(view_of(req, rules.timezone, key), explain="all")


def run_cases(rules: RuleSet, cases: Sequence[PolicyCase] | None = None) -> list[CaseResult]:
    """Run the file's cases (or ``cases``) against its rules."""
    return [CaseResult(c, explain(rules, c.request)) for c in (rules.cases if cases is None else cases)]
