"""The arms of an experiment, each with its own :class:`~router_core.decide.router.Router`, and the pick per request.

An arm's policy is the base configuration with the arm's sections (``router``, ``constraints``,
``scoring``, ``models``) put in their place, from a policy file or written inline; the fleet is
the base config's. Every arm's router is built once, when the gateway starts or reloads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router_core.config_file import read_model
from router_core.decide.builtin import builtin_registry
from router_core.decide.policy import build_policy
from router_core.decide.router import Router
from router_core.errors import PluginError
from router_core.experiments.assign import Assigner, Assignment
from router_core.framework import PluginRegistry
from schemas.config import ConstraintSpec, RouteLensConfig
from schemas.config.experiments import ExperimentsSettings, PolicyFile, PolicyRef, PolicySections
from schemas.errors import ConfigError

__all__ = ["Arm", "Arms", "arm_config", "build_arm_router", "build_arms", "load_policy"]


@dataclass(frozen=True, slots=True)
class Arm:
    """One arm: its name, the router version label and policy hash its traces carry, and its router."""

    name: str
    router_version: str
    share: float
    router: Router

    @property
    def policy_hash(self) -> str:
        """The hash of the policy the arm decides under (see :func:`router_core.decide.policy.policy_hash`)."""
        return self.router.policy.hash


def _path(path: str, base_dir: Path | None) -> Path:
    return Path(path) if base_dir is None or Path(path).is_absolute() else base_dir / path


def load_policy(path: str, base_dir: Path | None = None, *, field: str = "policy") -> PolicySections:
    """Read a policy file (a ``routelens.yaml``-like file) into its decision sections.

    Args:
        path: The file; a relative path is taken from ``base_dir`` (default: the working directory).
        base_dir: Where relative paths start.
        field: The configuration field that named the file, for the error message.

    Raises:
        ConfigError: The file cannot be read, or does not validate (its file, line and field named).
    """
    return read_model(PolicyFile, _path(path, base_dir), field=field).sections()


def arm_config(config: RouteLensConfig, policy: PolicyRef | None, base_dir: Path | None = None, *,
               field: str = "policy") -> RouteLensConfig:
    """The base config with the policy's sections in place of its own (``policy`` None: the base as it is).

    Raises:
        ConfigError: A policy file that cannot be read or does not validate.
    """
    if policy is None:
        return config
    sections = load_policy(policy, base_dir, field=field) if isinstance(policy, str) else policy
    return _merged(config, sections)


def _merged(config: RouteLensConfig, sections: PolicySections) -> RouteLensConfig:
    update = {k: v for k, v in sections if v is not None}
    return config.model_copy(update={**update, "experiments": None})


def build_arm_router(config: RouteLensConfig, policy: PolicyRef | None, *, registry: PluginRegistry | None = None,
                     base_dir: Path | None = None, field: str = "policy",
                     perf: Callable[[], float] = time.perf_counter) -> Router:
    """Build the router of one policy (an arm's or the shadow's) over the base config.

    Raises:
        ConfigError: The policy file does not load, or a plugin cannot be built; the file and
            line are named for a policy file, the configuration field for an inline policy.
    """
    registry = registry or builtin_registry()
    merged = arm_config(config, policy, base_dir, field=field)
    try:
        return Router(build_policy(merged, registry), perf=perf)
    except PluginError as exc:
        if isinstance(policy, str):
            p = _path(policy, base_dir)
            raise exc.at(str(p), p.read_text(encoding="utf-8")) from exc
        raise ConfigError(exc.source, [(line, f"{field}.{name}", msg) for line, name, msg in exc.problems]) from exc


class Arms:
    """The arms of one ``experiments:`` section and the assignment of requests to them.

    Args:
        settings: The section.
        arms: One :class:`Arm` per declared arm, in declaration order.
    """

    def __init__(self, settings: ExperimentsSettings, arms: Sequence[Arm]) -> None:
        self.settings = settings
        self.assigner = Assigner(settings)
        self.by_name = {a.name: a for a in arms}

    def __iter__(self) -> Any:
        return iter(self.by_name.values())

    def pick(self, request_id: str, headers: Mapping[str, str], body: Any) -> tuple[Arm, Assignment]:
        """The arm that serves one request, and how it was assigned.

        Raises:
            InvalidRequest: The forcing header names no arm.
        """
        assignment = self.assigner.assign(request_id, headers, body)
        return self.by_name[assignment.arm], assignment

    def constraints(self) -> list[ConstraintSpec]:
        """Every arm's constraints, once per name (the first arm declaring a name defines its latch)."""
        seen: dict[str, ConstraintSpec] = {}
        for arm in self.by_name.values():
            for spec in arm.router.policy.constraints:
                seen.setdefault(spec.name, spec)
        return list(seen.values())


def build_arms(config: RouteLensConfig, *, base: Router | None = None, registry: PluginRegistry | None = None,
               base_dir: Path | None = None, perf: Callable[[], float] = time.perf_counter) -> Arms | None:
    """Build the arms ``config.experiments`` declares (None when it declares none).

    Args:
        config: The whole configuration.
        base: The router of the base config: arms without a policy of their own reuse it.
        registry: Plugin types (None: the builtins).
        base_dir: Where relative policy paths start (default: the working directory).
        perf: Monotonic clock for the routers' step durations.

    Raises:
        ConfigError: A policy file that does not load or a plugin that cannot be built, naming
            the file, line and field.
    """
    exp = config.experiments
    if exp is None:
        return None
    registry = registry or builtin_registry()
    arms = []
    for i, spec in enumerate(exp.arms):
        field = f"experiments.arms[{i}].policy"
        if spec.policy is None and base is not None:
            router = base
        else:
            router = build_arm_router(config, spec.policy, registry=registry, base_dir=base_dir, field=field, perf=perf)
        arms.append(Arm(spec.name, spec.router_version, spec.share, router))
    return Arms(exp, arms)
