"""The effective policies a gateway decides with: each hashed once, and handed to storage once.

A trace's ``policy_hash`` names the whole effective policy (:mod:`router_core.decide.policy_doc`):
the lane's configuration sections, the routing file's rules as the gate holds them now (a reload
makes a new policy), the intents' routes, settings and thresholds as the gate's classifier in
force was fitted with them (a refit makes a new policy too). The first request decided under a new
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
    from router_core.gateway.live_intents import Serving
    from router_core.gateway.policy_gate import PolicyGate

__all__ = ["PolicyBook"]


class PolicyBook:
    """Hashes of the effective policies, by (lane policy, rule set, intents threshold).

    Args:
        gate: The gateway's policy gate (its current rule set and intents are part of every policy
            decided through it; an arm with its own routing section has its own gate).
        wall: UTC wall clock (a record's ``ts``).
        router_version: The base router's version label: the records of policies decided outside an arm carry it.
        record: Where a new policy's record goes (None: not stored).
        version_of: The version label of the router deciding for an arm (by name; None: the base
            router), read when that arm's policy is first recorded. Default: ``router_version`` for all.

    A record carries the version of the router that decides with the policy, as that router's
    traces do: an arm's its ``router_version``, the shadow's its own (``hash_of(..., version=)``).
    """

    def __init__(self, gate: PolicyGate, *, wall: Callable[[], datetime], router_version: str,
                 record: Callable[[PolicyRecord], None] | None = None,
                 version_of: Callable[[str | None], str] | None = None) -> None:
        self.gate = gate
        self._wall = wall
        self._version = router_version
        self._version_of = version_of
        self._record = record
        self._hashes: dict[tuple[str, str | None, str | None, float | None], str] = {}
        self.documents: dict[str, str] = {}  # hash -> canonical document, every policy seen

    def hash_of(self, policy: Policy, arm: str | None = None, gate: PolicyGate | None = None,
                version: str | None = None) -> str:
        """The effective hash of ``policy`` with ``gate``'s rules now (default: the gateway's gate).

        The document is built and stored on first use, under ``version`` (default: ``arm``'s router's
        version, see ``version_of``).
        """
        gate = gate or self.gate
        rules, intents = gate.rules, gate.intents_serving
        # the classifier's routes and settings, and whether its fit is done (its thresholds are final then)
        key = (policy.hash, None if rules is None else rules.hash, None if intents is None else intents.key,
               None if intents is None else intents.classifier.embedding_threshold)
        got = self._hashes.get(key)
        if got is None:
            got = self._hashes[key] = self._new(policy, arm, gate, version, intents)
        return got

    def _version_for(self, arm: str | None) -> str:
        return self._version if self._version_of is None else self._version_of(arm)

    def _new(self, policy: Policy, arm: str | None, gate: PolicyGate, version: str | None,
             intents: Serving | None) -> str:
        if policy.config is None:  # a policy built without its configuration: its own hash is all there is
            return policy.hash
        config, routing = policy.config, policy.config.routing
        settings = None if intents is None else intents.settings
        if routing.intents != settings:  # routing.intents reloaded: the document says what the classifier runs with
            config = config.model_copy(update={"routing": routing.model_copy(update={"intents": settings})})
        doc = policy_document(config, gate.rules, _intents(intents))
        digest = document_hash(doc)
        if digest not in self.documents:
            text = self.documents[digest] = canonical(doc)
            if self._record is not None:
                self._record(PolicyRecord(policy_hash=digest, ts=self._wall(), arm=arm, document=text,
                                          router_version=version or self._version_for(arm)))
        return digest


def _intents(serving: Serving | None) -> dict[str, Any] | None:
    if serving is None:
        return None
    intents = serving.classifier
    return {"routes": intents.routes, "fast_threshold": intents.fast_threshold,
            "early_threshold": intents.early_threshold, "embedding_threshold": intents.embedding_threshold,
            "calibration": intents.calibration}
