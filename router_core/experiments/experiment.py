"""An experiment as the gateway runs it: the arms that serve and the shadow that only decides.

Built once per configuration (at start and on every reload) and swapped whole, so a request sees
one consistent set of arms, shares and shadow from its assignment to its trace.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from router_core.decide.router import Router
from router_core.experiments.arms import Arms, build_arm_router, build_arms
from router_core.experiments.shadow import ShadowPolicy
from router_core.framework import PluginRegistry
from schemas.config import RouteLensConfig

__all__ = ["Experiment", "build_experiment"]


@dataclass(frozen=True, slots=True)
class Experiment:
    """The arms of an ``experiments:`` section and its optional shadow policy."""

    arms: Arms
    shadow: ShadowPolicy | None


def build_experiment(config: RouteLensConfig, *, base: Router | None = None, registry: PluginRegistry | None = None,
                     base_dir: Path | None = None, perf: Callable[[], float] = time.perf_counter,
                     ) -> Experiment | None:
    """Build the experiment ``config.experiments`` declares (None without one).

    Args:
        config: The whole configuration.
        base: The base config's router, reused by arms without a policy of their own.
        registry: Plugin types (None: the builtins).
        base_dir: Where relative policy paths start (default: the working directory).
        perf: Monotonic clock for the routers and the shadow's timing.

    Raises:
        ConfigError: A policy file that does not load or a plugin that cannot be built.
    """
    arms = build_arms(config, base=base, registry=registry, base_dir=base_dir, perf=perf)
    exp = config.experiments
    if arms is None or exp is None:
        return None
    spec = exp.shadow
    shadow = None
    if spec is not None:
        if spec.arm is not None:
            arm = arms.by_name[spec.arm]
            shadow = ShadowPolicy(arm.router, arm.router_version, spec.sample, arm=arm.name, perf=perf)
        else:
            router = build_arm_router(config, spec.policy, registry=registry, base_dir=base_dir,
                                      field="experiments.shadow.policy", perf=perf)
            shadow = ShadowPolicy(router, spec.router_version, spec.sample, perf=perf)
    return Experiment(arms, shadow)
