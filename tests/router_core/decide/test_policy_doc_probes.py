"""Whether probe verdicts are followed is part of the stored policy: it decides whether the probe filter runs."""

from __future__ import annotations

import pytest

from router_core.decide.builtin import build_router
from router_core.decide.policy_doc import canonical, from_document, policy_document
from tests.router_core.conftest import make_config


@pytest.mark.parametrize("probes", [{"enabled": False}, {"enabled": True}, {"enabled": False, "follow_url": "http://p"}])
def test_the_stored_policy_builds_the_same_plugins(probes: dict[str, object]) -> None:
    config = make_config(probes=probes)
    stored, _ = from_document(canonical(policy_document(config, None)))
    live, again = build_router(config).policy, build_router(stored).policy
    assert [f.name for f in again.filters] == [f.name for f in live.filters] and again.hash == live.hash
    assert ("probe" in [f.name for f in live.filters]) == bool(probes["enabled"] or probes.get("follow_url"))
