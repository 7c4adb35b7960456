"""The report of a counterfactual replay: stored traces of a time range re-decided under another policy.

Every count is over the traces of the window that matched the filter (``n``). A trace whose stored
detail cannot reproduce its decision (candidate states sampled out, no candidates) is counted in
``not_replayable`` with its reason, never guessed; rates are over ``replayed``.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, JsonValue

from schemas.common import ContractModel
from schemas.experiments import IpsEstimate

__all__ = ["FlipCause", "Mismatch", "PredictedDelta", "ReplayReport", "VerifyReport"]

NONE_TARGET = "(none)"  # the new policy would serve the request nowhere (reject, unknown model)


class FlipCause(ContractModel):
    """One reason decisions flipped, and how many flips it explains.

    ``kind``: ``rule`` (another rule applied), ``filter`` (the old winner was removed by this
    constraint or filter), ``fleet`` (the old winner's instance or model is not in the new fleet),
    ``term`` (the score term whose weighted difference between the new and the old winner moved
    most between the stored and the replayed decision), ``no_target`` (nothing would serve it).
    """

    kind: str
    name: str
    flips: int = Field(ge=0)


class PredictedDelta(ContractModel):
    """A predicted per-request difference (new choice minus stored choice), and what it is based on."""

    basis: str
    requests: int = Field(ge=0, description="Replayed requests both values could be predicted for.")
    old_mean: float | None = None
    new_mean: float | None = None
    delta_mean: float | None = None
    delta_total: float = 0.0


class ReplayReport(ContractModel):
    """What a policy would have decided differently over one window of stored traces."""

    since: datetime
    until: datetime
    policy: str = Field(description="The policy file replayed under.")
    policy_hash: str
    filter: dict[str, str] = {}
    n: int = Field(ge=0, description="Traces in the window that matched the filter.")
    replayed: int = Field(ge=0)
    not_replayable: int = Field(ge=0)
    not_replayable_reasons: dict[str, int] = {}
    flips: int = Field(ge=0, description="Replayed traces whose first choice (instance) changed.")
    model_flips: int = Field(0, ge=0, description="Flips that also changed the model.")
    flip_rate: float | None = Field(None, description="flips / replayed; None when nothing was replayed.")
    flip_ci: tuple[float, float] | None = Field(None, description="95% Wilson interval of flip_rate.")
    matrix: dict[str, dict[str, int]] = Field(default={}, description="Stored model -> replayed model -> requests.")
    instance_matrix: dict[str, dict[str, int]] = Field(
        default={}, description="Stored instance -> replayed instance -> requests.")
    causes: list[FlipCause] = Field(default=[], description="Flip attribution, most flips first.")
    cost: PredictedDelta
    latency: PredictedDelta
    elapsed_s: float = Field(0.0, ge=0)
    traces_per_s: float | None = None
    cpu_s: float = Field(0.0, ge=0, description="CPU seconds of the processes that read and re-decided.")
    ips: dict[str, IpsEstimate] = Field(
        default={}, description="Inverse-propensity estimates of the replayed policy's cost_per_request and "
                                "misroute_rate from the logged traffic (selection probabilities, costs, feedback).")


class Mismatch(ContractModel):
    """A stored decision its own policy decides differently: where, and the two values there."""

    request_id: str
    first_differing_step: str = Field(description="The rule, the weights, a step or a candidate's field.")
    live: JsonValue = None
    replayed: JsonValue = None


class VerifyReport(ContractModel):
    """Every stored decision of a window, re-decided under the policy it was decided with."""

    n: int = Field(ge=0, description="Traces in the window.")
    reproduced: int = Field(ge=0)
    not_replayable: dict[str, int] = Field(default={}, description="Traces that cannot be re-decided, by reason.")
    mismatches: list[Mismatch] = Field(default=[], description="The first mismatches (up to a limit).")
    mismatched: int = Field(0, ge=0, description="All mismatches, listed or not.")
    policies: int = Field(0, ge=0, description="Distinct stored policies read.")
    elapsed_s: float = Field(0.0, ge=0)
