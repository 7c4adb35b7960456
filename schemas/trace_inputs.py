"""What the gateway settled for a decision that is neither the request nor the state: the trace's ``inputs``.

``decide`` is a pure function of the request's features, the candidates' states, the policy and
these inputs (the matched rule as its throttle left it, the router's mode and round-robin turn,
the session's instance, the budget, the breakers that blocked instances). With them in the trace
and the policy stored under its hash, a stored decision can be re-decided exactly.
"""

from __future__ import annotations

from pydantic import Field

from schemas.common import ContractModel, RoutingMode

__all__ = ["BlockedInstance", "BudgetInput", "DecisionInputs", "ModeInput", "ModelWeight"]


class ModelWeight(ContractModel):
    """One model's preset weight in the static mode's round robin."""

    model: str
    weight: int = Field(ge=0)


class ModeInput(ContractModel):
    """The router's own degraded mode for this decision (static round robin, or safe)."""

    mode: RoutingMode
    seq: int = Field(0, ge=0, description="The static round robin's turn.")
    safe_model: str | None = None
    weights: list[ModelWeight] = Field(default=[], description="Static mode's preset weight per model.")
    reason: str = ""


class BudgetInput(ContractModel):
    """The cost budget as the decision saw it."""

    band: str | None = None
    use: float = Field(0.0, ge=0)
    cost_factor: float = Field(1.0, ge=0)
    stopped: list[str] = Field(default=[], description="Models the spent budget stopped.")
    governs_all: bool = False
    reason: str = ""


class BlockedInstance(ContractModel):
    """An instance a breaker (its own, its model's or its zone's) let nothing through to."""

    instance: str
    scope: str = Field(description="instance, model or zone.")
    state: int = Field(ge=0, description="The breaker's state (2 open, 1 half-open with its trial slots taken).")
    reason: str


class DecisionInputs(ContractModel):
    """Everything besides features and states that the decision read."""

    local_hour: int | None = Field(None, ge=0, le=23, description="The hour in the rule set's time zone.")
    skip_primary: bool = Field(False, description="The rule's throttle sent the request down its chain.")
    mode: ModeInput | None = None
    affinity: str | None = Field(None, description="The instance the request's session was bound to.")
    budget: BudgetInput | None = None
    blocked: list[BlockedInstance] = []
