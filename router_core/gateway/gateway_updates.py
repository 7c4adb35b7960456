"""What a running gateway takes in, each handed to the parts that keep it.

A changed configuration file (:meth:`GatewayUpdates.reload`: its experiments and intents; the rest
waits for a restart), a feedback verdict (the misroute share and the quality table), a probe's
verdict or its run of results (the state view, the learned quality, the breakers), a breaker's new
state (its gauge). With them, what the experiment in force decides with: the constraints of every
arm, the shadow's policy hash, an arm's router version. :class:`GatewayUpdates` is the base of
:class:`~router_core.gateway.server.Gateway`, whose constructor sets the parts it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from router_core.decide.router import Router
from router_core.experiments import Experiment, RestartNeeded, build_experiment
from router_core.gateway.arm_gates import SHADOW, arm_gates
from router_core.gateway.policy_book import PolicyBook
from router_core.gateway.policy_gate import PolicyGate
from router_core.metrics import GatewayMetrics
from router_core.resilience.breakers import BreakerBoard
from router_core.resilience.router_modes import RouterModes
from router_core.state.quality import QualityTable
from router_core.state.view import StateView
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config import ConstraintSpec, RouteLensConfig
from schemas.fleet import InstanceSpec
from schemas.probe import ProbeStatus

__all__ = ["GatewayUpdates"]


class GatewayUpdates:
    """How :class:`~router_core.gateway.server.Gateway` takes what changes while it runs.

    The gateway's constructor sets these parts.
    """

    config: RouteLensConfig
    policy: PolicyGate
    router: Router
    experiment: Experiment | None
    arm_gates: dict[str, PolicyGate]
    _config_path: str | None
    restart_needed: RestartNeeded
    view: StateView
    quality: QualityTable
    _perf: Callable[[], float]
    metrics: GatewayMetrics
    breakers: BreakerBoard
    _specs: dict[str, InstanceSpec]
    router_modes: RouterModes
    book: PolicyBook

    def _constraints(self, experiment: Experiment) -> list[ConstraintSpec]:
        """The base policy's constraints, then any other arm's or the shadow's (once per name)."""
        specs = {c.name: c for c in self.router.policy.constraints}
        routers = [a.router for a in experiment.arms] + ([experiment.shadow.router] if experiment.shadow else [])
        for r in routers:
            for c in r.policy.constraints:
                specs.setdefault(c.name, c)
        return list(specs.values())

    def _breaker_gauge(self, scope: str, name: str, state: int) -> None:
        self.metrics.record_breaker(scope, name, state)

    def reload(self, config: RouteLensConfig) -> None:
        """Take a changed configuration's ``experiments`` and ``routing.intents``; name what else needs a restart.

        ``experiments``: arms, shares and shadow. Keys whose bucket stays in their arm's range keep
        their arm (see :mod:`router_core.experiments.assign`). Constraints new to every arm have no
        latch in the state view until a restart; their filters then judge the snapshot as it is.
        ``routing.intents``: refitted in the background, the classifier in force serving meanwhile
        (:meth:`PolicyGate.set_intents`). Any other changed section is listed in
        :attr:`restart_needed` (``/v1/router/state`` → ``config.restart_needed``) and warned about once.

        Raises:
            ConfigError: The new section's policies do not load; the running experiment and intents stay.
        """
        # routing.intents stays as started in self.config: arms compare their routing with the gate's (arm_gates)
        self.restart_needed.update(self.config, config, self._config_path)
        merged = self.config.model_copy(update={"experiments": config.experiments})
        experiment = build_experiment(merged, base=self.router, perf=self._perf)
        self.arm_gates = arm_gates(experiment, self.policy)
        self._hash_shadow(experiment)
        self.experiment = experiment
        self.config = merged
        self.policy.set_intents(config.routing.intents)

    def _learn(self, verdict: dict[str, Any]) -> None:
        """One feedback verdict, from this replica or another: the misroute share, and the quality table."""
        correct = bool(verdict.get("correct"))
        self.router_modes.observe_feedback(correct)
        model, cls = verdict.get("model"), verdict.get("class")
        if isinstance(model, str) and isinstance(cls, str):
            instance = verdict.get("instance")
            self.quality.update(model, cls, correct, instance=instance if isinstance(instance, str) else None)

    def apply_probe(self, status: ProbeStatus, instance: str) -> None:
        """Take a probe verdict into the state view (the ``probe`` filter reads it from the snapshot).

        Called on every newer reading of a verdict (its value and reason too, so the router's state
        shows the latest), and on its changes.
        When a syntax or semantic verdict returns to ``ok`` after a change, the instance's learned
        quality is forgotten: its feedback described the fault the probes now see cured, and a
        flagged instance would otherwise get too little traffic to ever earn its way back.
        """
        before = self.view.probe_of(instance, status.kind)
        self.view.set_probe(status, instance)
        moved = before is None or (before.verdict, before.since) != (status.verdict, status.since)
        if moved and status.verdict is ProbeVerdict.OK and status.flaps and status.kind is not ProbeKind.LATENCY:
            self.quality.forget(instance)

    def probe_run(self, instance: str, kind: str, results: int, ok_run: int) -> None:
        """Take the prober's count of one kind's results on ``instance`` (every result, not only changes).

        Seed 003's recovery: ``close_after`` probe rounds passed in a row close the instance's and
        its model's open breakers (:meth:`router_core.resilience.breakers.BreakerBoard.probe_run`).
        """
        spec = self._specs.get(instance)
        if spec is not None:
            self.breakers.probe_run(spec, kind, results, ok_run)

    def _hash_shadow(self, experiment: Experiment | None) -> None:
        """Let the shadow's decisions name its effective policy (its rules included), stored like the arms'."""
        shadow = None if experiment is None else experiment.shadow
        if shadow is None:
            return
        policy, arm, version = shadow.router.policy, shadow.arm, shadow.router_version
        shadow.hash_of = lambda: self.book.hash_of(policy, arm, self.arm_gates.get(SHADOW), version)

    def _version_of(self, arm: str | None) -> str:
        """The version label of the router deciding for ``arm`` now (None, or an arm no longer declared: the base's)."""
        found = None if arm is None or self.experiment is None else self.experiment.arms.by_name.get(arm)
        return self.config.router.version if found is None else found.router_version

