"""Stage 3, admit: the matched rule's throttle, then what the decision will be given (its context).

:func:`admit` applies the throttle and says whether the request goes on (nothing to await when the
rule has none: :func:`unthrottled`); :func:`bind` binds the session (affinity); :func:`context`
ticks the router's own mode, refuses an input no candidate's context window holds or an attachment
no candidate's model accepts, and builds the :class:`DecisionContext`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from router_core.decide.attachments import Attachment, refuse_unacceptable
from router_core.decide.decision import DecisionContext
from router_core.decide.router import Router
from router_core.errors import Throttled
from router_core.gateway.callers import check_context
from router_core.gateway.placement import bound_instance, context_candidates
from router_core.gateway.policy_gate import PolicyGate
from router_core.resilience.affinity import AffinityBinder
from router_core.resilience.breakers import BreakerBoard
from router_core.resilience.budgets import BudgetTracker
from router_core.resilience.router_modes import RouterModes
from router_core.rules.route import RouteChoice
from router_core.state.quality import QualityTable
from schemas.config.attachments import AttachmentSettings
from schemas.fleet import InstanceSnapshot
from schemas.trace import RequestFeatures

__all__ = ["Admitted", "admit", "bind", "context", "unthrottled"]


@dataclass(frozen=True, slots=True)
class Admitted:
    """The route as the throttle left it (sent down its chain, or not), and the refusal of a rejected request."""

    route: RouteChoice | None
    refusal: Throttled | None


def unthrottled(choice: RouteChoice | None) -> bool:
    """True when the matched rule has no throttle (nothing to await: :func:`admit` would let it through as it is)."""
    return choice is None or choice.rule is None or choice.rule.throttle is None


async def admit(policy: PolicyGate, choice: RouteChoice | None) -> Admitted:
    """Apply the matched rule's throttle."""
    route, admission = await policy.admit(choice)
    if admission.action != "reject":
        return Admitted(route, None)
    name = route.rule.name if route is not None and route.rule is not None else "?"
    return Admitted(route, Throttled(f"rule {name} is throttled", retry_after_s=admission.retry_after_s))


async def bind(affinity: AffinityBinder, router: Router, http: web.Request, body: Any, features: RequestFeatures,
               route: RouteChoice | None, state: Callable[[], Mapping[str, InstanceSnapshot]], *,
               dry_run: bool = False) -> str | None:
    """The instance the request's session is bound to (bound now if it was not, unless ``dry_run``; None: none)."""
    return await bound_instance(affinity, router, http, body, features, route, state, dry_run=dry_run)


def context(*, request_id: str, features: RequestFeatures, intent: str | None, now: datetime,
            route: RouteChoice | None, bound: str | None, attachments: tuple[Attachment, ...], router: Router,
            modes: RouterModes, budgets: BudgetTracker, quality: QualityTable, breakers: BreakerBoard,
            accepts: AttachmentSettings, dry_run: bool = False) -> DecisionContext:
    """The decision's context, once the request is known to fit somewhere (``bound``: see :func:`bind`).

    ``dry_run``: change nothing; the router's mode is read as it stands (not ticked, no round-robin
    turn taken), so the next live request still gets the turn a dry run showed.

    Raises:
        InvalidRequest: No candidate's context window holds the input (``context_length_exceeded``),
            or no candidate's model accepts an attachment's type.
    """
    if not dry_run:
        modes.tick()
    ctx = DecisionContext(request_id=request_id, features=features, intent=intent, now=now,
                          quality=quality.snapshot(), blocked=breakers.blocked(router.policy.fleet), route=route,
                          mode=modes.peek() if dry_run else modes.choice(), affinity=bound,
                          budget=budgets.view(now) if budgets.is_enabled else None)
    ends = context_candidates(router, features.requested_model, route)
    check_context(features, ends)  # refused, not forwarded
    refuse_unacceptable(attachments, accepts, [s.model for s in ends])
    return ctx
