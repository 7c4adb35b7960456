"""A shadow policy: decides a sampled share of requests beside the live one, without serving them.

The shadow decides on the very context and state snapshot the live decision saw (both are
immutable values), so the comparison is like for like; a shadow with a routing section of its own
gets that context with its own rule's route (matched while the request was analysed). The gateway
runs it off the request's critical path, after the response has been handed to the transport and
before the trace is emitted (see :meth:`router_core.gateway.server.Gateway`): the trace then
records what the shadow would have served, where it ranked the live choice, and whether the
decision flipped. Sampling hashes the request id (salted), so a replay samples the same requests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import mmh3

from router_core.decide.decision import Decision, DecisionContext
from router_core.decide.router import Router
from schemas.fleet import InstanceSnapshot
from schemas.trace import ShadowDecision

__all__ = ["SHADOW_SEED", "ShadowJob", "ShadowPolicy", "compare"]

log = logging.getLogger(__name__)

SHADOW_SEED = 0x05AD_0001  # salted apart from the arm hash and the pickers' seed
_SPAN = float(1 << 32)


def compare(live: Decision, shadow: Decision) -> tuple[str | None, str | None, int | None, bool]:
    """``(shadow model, shadow instance, rank of the live choice under the shadow, flipped)``.

    The rank is None when the shadow ruled the live choice out (infeasible, or not a candidate).
    """
    live_id = live.selected.id if live.selected is not None else None
    chosen = shadow.selected
    rank = None
    if live_id is not None:
        rank = next((c["rank"] for c in shadow.candidates if c["instance"] == live_id), None)
    shadow_id = chosen.id if chosen is not None else None
    return (chosen.model if chosen else None), shadow_id, rank, shadow_id != live_id


@dataclass(frozen=True, slots=True)
class ShadowJob:
    """One pending shadow decision: the shadow, and what the live decision saw and concluded."""

    shadow: ShadowPolicy
    ctx: DecisionContext
    state: Mapping[str, InstanceSnapshot]
    live: Decision

    def __call__(self) -> ShadowDecision | None:
        """Decide under the shadow policy; None (logged) when it cannot decide this request."""
        return self.shadow.decide(self.ctx, self.state, self.live)


class ShadowPolicy:
    """A candidate policy deciding beside the live one.

    Args:
        router: The shadow policy's router.
        router_version: The version label recorded in ``ShadowDecision.router_version``.
        sample: Share of requests decided, in [0, 1].
        arm: The experiment arm the policy belongs to, if any.
        perf: Monotonic clock timing the shadow decision (injected).
    """

    def __init__(self, router: Router, router_version: str, sample: float = 1.0, *, arm: str | None = None,
                 perf: Callable[[], float] = time.perf_counter) -> None:
        self.router = router
        self.router_version = router_version
        self.sample = sample
        self.arm = arm
        self._perf = perf
        self._cut = sample * _SPAN
        # The effective policy's hash (its rules included), set by the gateway that runs it.
        self.hash_of: Callable[[], str] | None = None

    @property
    def policy_hash(self) -> str:
        """The shadow policy's hash: the effective one when the gateway gave it, else its sections'."""
        return self.router.policy.hash if self.hash_of is None else self.hash_of()

    def wants(self, request_id: str) -> bool:
        """Whether this request is in the sampled share (a salted hash of its id, not a global RNG)."""
        return self.sample >= 1.0 or mmh3.hash(request_id, SHADOW_SEED, signed=False) < self._cut

    def job(self, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot], live: Decision) -> ShadowJob | None:
        """The shadow decision to run later for this request, or None when it is not sampled."""
        return ShadowJob(self, ctx, state, live) if self.wants(ctx.request_id) else None

    def decide(self, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot],
               live: Decision) -> ShadowDecision | None:
        """Decide ``ctx`` under the shadow policy on ``state`` and compare with ``live``."""
        t0 = self._perf()
        try:
            decision = self.router.decide(ctx, state)
        except Exception:  # a shadow must never cost the live request its trace
            log.exception("shadow policy %s could not decide %s", self.policy_hash, ctx.request_id)
            return None
        model, instance, rank, flipped = compare(live, decision)
        return ShadowDecision(router_version=self.router_version, policy_hash=self.policy_hash, arm=self.arm,
                              selected_model=model, selected_instance=instance, live_rank=rank, flipped=flipped,
                              latency_ms=(self._perf() - t0) * 1e3)
