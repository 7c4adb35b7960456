"""The ``experiments:`` section: A/B arms with traffic shares, and an optional shadow policy.

An arm's policy is written the way ``routelens.yaml`` writes one: a path to a policy file (a
``routelens.yaml``-like file whose ``router``, ``constraints``, ``scoring``, ``models`` and
``routing`` sections are read), or those sections inline. Sections an arm leaves out are the base
config's. An arm's ``routing`` gives it its own routing file (rules, chains, their throttles),
intents and keywords; the gateway-wide guards before routing (``throttles``) stay the base's.
The fleet is always the base config's: arms differ in how they decide, not in what they route to.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Self

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from schemas.common import ContractModel
from schemas.config.decision import ConstraintSpec, ModelProfile, RouterSettings, ScoringSettings
from schemas.config.routing import RoutingSettings
from schemas.paths import InputFile

__all__ = ["ArmSpec", "ExperimentsSettings", "PolicyFile", "PolicySections", "ShadowSpec", "SHARE_TOLERANCE"]

ARM_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
KEY_PATTERN = r"^(request_id|session|header:[A-Za-z0-9-]+|metadata:[A-Za-z0-9_.-]+)$"
SHARE_TOLERANCE = 1e-9


class PolicySections(ContractModel):
    """A policy written inline: the decision-changing sections of ``routelens.yaml``, each optional.

    A section left out is the base config's; a section given replaces it whole (as in the file).
    """

    router: RouterSettings | None = None
    constraints: list[ConstraintSpec] | None = None
    scoring: ScoringSettings | None = None
    models: dict[str, ModelProfile] | None = None
    routing: RoutingSettings | None = None


class PolicyFile(PolicySections):
    """A policy file: its decision sections; the other ``routelens.yaml`` sections may be there and are not read.

    So a whole ``routelens.yaml`` is a policy file too (its fleet, gateway, storage... are the
    serving config's business, not the arm's), while a misspelt section is still an error.
    """

    gateway: Any = None
    storage: Any = None
    fleet: Any = None
    scrape: Any = None
    sim: Any = None
    app: Any = None
    probes: Any = None
    experiments: Any = None

    def sections(self) -> PolicySections:
        """The decision sections alone."""
        return PolicySections(router=self.router, constraints=self.constraints, scoring=self.scoring,
                              models=self.models, routing=self.routing)


def _policy_kind(value: Any) -> str:
    return "file" if isinstance(value, str) else "inline"


# A file path (relative to the config file), or the sections inline; told apart by type, so an
# unreadable file is one error about the file, not one more about the inline form it is not.
PolicyRef = Annotated[
    Annotated[InputFile, Tag("file")] | Annotated[PolicySections, Tag("inline")], Discriminator(_policy_kind)
]


class ArmSpec(ContractModel):
    """One arm of the experiment: its name, router version label, traffic share and policy.

    ``policy`` None decides with the base config's own sections (the control arm).
    """

    name: str = Field(pattern=ARM_NAME_PATTERN)
    router_version: str = Field(min_length=1, description="Written into every trace this arm serves.")
    share: float = Field(ge=0, le=1, description="Fraction of keys assigned to this arm.")
    policy: PolicyRef | None = Field(None, description="A policy file path, or inline sections.")


class ShadowSpec(ContractModel):
    """A candidate policy that decides beside the live one without serving the request.

    Either ``arm`` names an arm whose policy and version the shadow uses, or ``policy`` (with
    ``router_version``) gives its own. ``sample`` is the share of requests it decides.
    """

    arm: str | None = Field(None, description="Shadow with this arm's policy and version.")
    router_version: str = Field("shadow", min_length=1)
    policy: PolicyRef | None = None
    sample: float = Field(1.0, ge=0, le=1, description="Share of requests the shadow decides.")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if self.arm is not None and self.policy is not None:
            raise ValueError("give either arm or policy, not both")
        if self.arm is None and self.policy is None:
            raise ValueError("give the arm whose policy shadows, or a policy")
        return self


class ExperimentsSettings(ContractModel):
    """Named arms over shares of the traffic, assigned by MurmurHash of a key, and a shadow.

    ``key``: ``request_id``, ``header:<name>`` (e.g. ``header:x-user-id``), ``session`` (the
    ``x-session-id`` header, else the body's ``user``) or ``metadata:<key>`` (the body's
    ``metadata``); a request without the key falls back to its request id. Arms own cumulative
    ranges of the hash in declaration order, so changing shares moves only the keys at the
    boundaries. ``force_header`` names an arm for one request (testing, "traffic dyeing"): its trace
    says ``arm_forced``, and comparisons and the split check leave it out (counting it apart).
    """

    key: str = Field("request_id", pattern=KEY_PATTERN)
    force_header: str = Field("x-routelens-arm", pattern=r"^[A-Za-z0-9-]+$")
    arms: list[ArmSpec] = Field(min_length=1)
    shadow: ShadowSpec | None = None

    @field_validator("arms")
    @classmethod
    def _arms_add_up(cls, arms: list[ArmSpec]) -> list[ArmSpec]:
        names = [a.name for a in arms]
        if dupes := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"arm names must be unique (repeated: {', '.join(dupes)})")
        total = math.fsum(a.share for a in arms)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise ValueError(f"arm shares must sum to 1 (they sum to {total:.12g})")
        return arms

    @model_validator(mode="after")
    def _shadow_arm_known(self) -> Self:
        if self.shadow is not None and self.shadow.arm is not None and self.shadow.arm not in self.arm_names:
            raise ValueError(f"shadow.arm {self.shadow.arm!r} is not an arm (arms: {', '.join(self.arm_names)})")
        return self

    @property
    def arm_names(self) -> list[str]:
        """The arms' names in declaration order."""
        return [a.name for a in self.arms]
