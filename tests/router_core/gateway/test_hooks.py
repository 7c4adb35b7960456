"""The gateway calls its trace hooks through :class:`TraceHooks` only: every member there, none found by name.

A hooks class that misspells a member (``storage_sate``) used to be read as "no such feature"
(the gateway looked members up with ``getattr``); every implementation now defines each member.
"""

from __future__ import annotations

import inspect

import pytest

from app.run.gateway_app import StoreHooks
from router_core.gateway import TraceHooks
from tests.router_core.gateway.quiet_hooks import QuietHooks
from tests.router_core.gateway.test_forwarding import MemoryHooks

MEMBERS = sorted(name for name in vars(TraceHooks) if not name.startswith("_"))


def test_the_protocol_names_every_member_the_gateway_calls() -> None:
    assert MEMBERS == ["emit", "emit_plain", "has_stored_verdict", "health", "lookup", "lookup_elsewhere",
                       "record_event", "record_feedback", "record_policy", "record_snapshots", "storage_state",
                       "takes_plain"]


@pytest.mark.parametrize("hooks", [StoreHooks, QuietHooks, MemoryHooks], ids=lambda c: c.__name__)
def test_each_implementation_defines_every_member(hooks: type) -> None:
    missing = [name for name in MEMBERS if not hasattr(hooks, name)]
    assert missing == []
    assert isinstance(hooks.takes_plain, bool)
    assert inspect.iscoroutinefunction(hooks.lookup_elsewhere)


def test_hooks_with_nothing_to_do_answer_as_the_protocol_says() -> None:
    hooks = QuietHooks()
    assert (hooks.takes_plain, hooks.storage_state(), hooks.health()) == (False, None, None)
