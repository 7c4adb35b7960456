"""The ``routing:`` section: the routing policy file and what its conditions read.

::

    routing:
      policy: policies/compliance.yaml   # a routing matrix or a routing DSL (router_core.rules)
      timezone: Asia/Shanghai            # request_time.hour / .weekday are read here
      peak_hours: [[9, 12], [14, 18]]    # where cost_params.surge_multiplier applies
      term_lists:                        # contains_<name>(prompt); legal_terms has a default list
        legal_terms: [条款, 合同, 第{n}章, clause, contract]   # {n}: a number (第12章, 第 三 章)
      intents: {...}                     # semantic intents (schemas.config.intents)
      keywords: {...}                    # rule-enhanced keyword scoring (schemas.config.keywords)
      attachments: {...}                 # attachment typing and limits (schemas.config.attachments)

Without ``policy`` the router routes as before: ``auto`` over every model, or the requested model.
"""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import AfterValidator, Field, model_validator

from schemas.common import ContractModel
from schemas.config.attachments import AttachmentSettings
from schemas.config.intents import IntentSettings
from schemas.config.keywords import KeywordScoring
from schemas.paths import InputFile
from schemas.units import ZoneName

__all__ = ["DEFAULT_LEGAL_TERMS", "HourRange", "RoutingSettings", "check_hours", "in_hours"]

# Seed 000: ["条款", "合同", "第x章"]; "第x章" is a chapter of any number, "{n}" in a term (see
# router_core.rules.condition.features.prompt_matcher).
DEFAULT_LEGAL_TERMS = (
    "条款", "合同", "第{n}章", "协议", "违约", "法律", "法规", "合规", "监管", "仲裁", "诉讼", "赔偿", "免责",
    "clause", "contract", "agreement", "liability", "indemnity", "indemnification", "warranty",
    "regulation", "regulatory", "compliance", "arbitration", "litigation", "statute", "jurisdiction",
)
TERM_LIST_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"


def check_hours(value: tuple[int, int]) -> tuple[int, int]:
    """An hour range as ``peak_hours``, scoring profiles and budget bands read it, or ValueError.

    ``[start, end)`` of local hours: ``start`` 0-23 and ``end`` 0-24 (24 is midnight, and so is 0
    as an end), ``start > end`` wraps midnight (``[22, 6]``: 22:00-06:00). A range that never
    applies (a start of 24, an hour past 24, ``start == end``) is refused.
    """
    start, end = value
    if not (0 <= start <= 23 and 0 <= end <= 24) or start == end:
        raise ValueError(f"[{start}, {end}] never applies: an hour range is [start, end) of local hours with start "
                         "0-23, end 0-24 (24 is midnight) and start != end; start > end wraps midnight ([22, 6] is "
                         "22:00-06:00)")
    return value


def in_hours(hour: int, start: int, end: int) -> bool:
    """Whether a local ``hour`` is in the range ``[start, end)`` as :func:`check_hours` reads it (wrapping midnight)."""
    return start <= hour < end if start < end else hour >= start or hour < end


HourRange = Annotated[tuple[int, int], AfterValidator(check_hours)]


class RoutingSettings(ContractModel):
    """Where the routing policy is and what its conditions read."""

    policy: InputFile | None = Field(
        None, description="Routing matrix (YAML) or DSL file; relative to the config file.")
    timezone: ZoneName = Field("UTC", description="IANA zone of request_time.hour and .weekday.")
    peak_hours: list[HourRange] = Field(
        default=[(9, 12), (14, 18)],
        description="[start, end) local hours where cost surge multipliers apply: start 0-23, end 0-24 (24: "
        "midnight), start > end wraps midnight.")
    term_lists: dict[str, list[str]] = Field(default={}, description="contains_<name>(prompt) term lists.")
    intents: IntentSettings | None = None
    keywords: KeywordScoring | None = None
    attachments: AttachmentSettings = AttachmentSettings()


    @model_validator(mode="after")
    def _term_list_names(self) -> Self:
        import re

        for name in self.term_lists:
            if not re.match(TERM_LIST_PATTERN, name):
                raise ValueError(f"term list name {name!r} must match {TERM_LIST_PATTERN}")
        return self

    def terms(self) -> dict[str, tuple[str, ...]]:
        """Every term list by name: the defaults, overridden by the configured ones."""
        out: dict[str, tuple[str, ...]] = {"legal_terms": DEFAULT_LEGAL_TERMS}
        out.update({k: tuple(v) for k, v in self.term_lists.items()})
        return out
