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
    """A predicted per-request difference (new choice minus stored choice), and what it is based on.

    Two bases: ``requests`` (every replayed request the delta is known for: the unflipped, whose
    delta is 0, and the flips with both values) for ``delta_mean``, and ``flipped`` (those flips
    alone) for ``old_mean`` and ``new_mean``. So ``new_mean - old_mean`` is the mean change of a
    flipped request, and ``delta_mean = (new_mean - old_mean) * flipped / requests =
    delta_total / requests``. Flips whose value is unknown are in neither, and the basis says how many.
    """

    basis: str
    requests: int = Field(ge=0, description="Replayed requests the delta is known for: the unflipped (delta 0) "
                                            "and the flips both values could be predicted for.")
    flipped: int = Field(0, ge=0, description="Of requests, the flips (both values predicted): the base of "
                                              "old_mean and new_mean.")
    old_mean: float | None = Field(None, description="Mean value of the stored choice over the flipped requests "
                                                     "only (None: no flip).")
    new_mean: float | None = Field(None, description="Mean value of the replayed choice over the flipped requests "
                                                     "only (None: no flip).")
    delta_mean: float | None = Field(None, description="delta_total / requests: the mean change over all the "
                                                       "requests, unflipped ones counting 0 (None: no request).")
    delta_total: float = Field(0.0, description="Sum of new minus stored over the flipped requests "
                                                "(= (new_mean - old_mean) * flipped).")


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
