"""The effective policies a gateway decides with: each hashed once, and handed to storage once.

A trace's ``policy_hash`` names the whole effective policy (:mod:`router_core.decide.policy_doc`):
the lane's configuration sections, the routing file's rules as the gate holds them now (a reload
makes a new policy), the intents' routes and thresholds. The first request decided under a new
one builds its document and hands a :class:`~schemas.policy_record.PolicyRecord` to storage; every
other request pays one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from router_core.decide.policy import Policy
from router_core.decide.policy_doc import canonical, document_hash, policy_document
from schemas.policy_record import PolicyRecord

if TYPE_CHECKING:
    from router_core.gateway.policy_gate import PolicyGate

__all__ = ["PolicyBook"]


class PolicyBook:
    """Hashes of the effective policies, by (lane policy, rule set, intents threshold).

    Args:
        gate: The gateway's policy gate (its current rule set and intents are part of every policy
            decided through it; an arm with its own routing section has its own gate).
        wall: UTC wall clock (a record's ``ts``).
        router_version: The version label the records carry.
        record: Where a new policy's record goes (None: not stored).
    """

    def __init__(self, gate: PolicyGate, *, wall: Callable[[], datetime], router_version: str,
                 record: Callable[[PolicyRecord], None] | None = None) -> None:
        self.gate = gate
        self._wall = wall
        self._version = router_version
        self._record = record
        self._hashes: dict[tuple[str, str | None, float | None], str] = {}
        self.documents: dict[str, str] = {}  # hash -> canonical document, every policy seen

    def hash_of(self, policy: Policy, arm: str | None = None, gate: PolicyGate | None = None) -> str:
        """The effective hash of ``policy`` with ``gate``'s rules now (default: the gateway's gate).

        The document is built and stored on first use.
        """
        gate = gate or self.gate
        rules, intents = gate.rules, gate.intents
        threshold = None if intents is None else intents.embedding_threshold
        key = (policy.hash, None if rules is None else rules.hash, threshold)
        got = self._hashes.get(key)
        if got is None:
            got = self._hashes[key] = self._new(policy, arm, gate)
        return got

    def _new(self, policy: Policy, arm: str | None, gate: PolicyGate) -> str:
        if policy.config is None:  # a policy built without its configuration: its own hash is all there is
            return policy.hash
        doc = policy_document(policy.config, gate.rules, _intents(gate))
        digest = document_hash(doc)
        if digest not in self.documents:
            text = self.documents[digest] = canonical(doc)
            if self._record is not None:
                self._record(PolicyRecord(policy_hash=digest, ts=self._wall(), router_version=self._version, arm=arm,
                                          document=text))
        return digest



def _intents(gate: PolicyGate) -> dict[str, Any] | None:
    intents = gate.intents
    if intents is None:
        return None
    return {"routes": intents.routes, "fast_threshold": intents.fast_threshold,
            "early_threshold": intents.early_threshold, "embedding_threshold": intents.embedding_threshold,
            "calibration": intents.calibration}
