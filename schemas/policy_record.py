"""A routing policy as a gateway decided with it, stored once under the hash its traces carry.

``document`` is the effective policy as canonical JSON (see ``router_core.decide.policy_doc``): the
configuration sections that change decisions, the routing file's text, the intents' routes and
fitted thresholds. Its SHA-256 is the ``policy_hash`` of every trace decided under it, so a stored
trace can be re-decided under its own policy after the files changed.
"""

from __future__ import annotations

from pydantic import Field

from schemas.common import ContractModel, UtcTime

__all__ = ["PolicyRecord"]


class PolicyRecord(ContractModel):
    """One effective policy, by its hash."""

    policy_hash: str = Field(min_length=1, max_length=128)
    ts: UtcTime = Field(description="When a gateway first decided with it.")
    router_version: str
    arm: str | None = Field(None, description="The experiment arm whose policy it is (None: the base policy).")
    document: str = Field(description="The effective policy, canonical JSON.")
