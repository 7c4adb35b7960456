"""The policy gate of each experiment arm (and the shadow) whose ``routing`` section is its own.

An arm that leaves ``routing`` out shares the gateway's gate. One with its own gets a
:class:`~router_core.gateway.policy_gate.PolicyGate` of its own, built with the experiment (at
start and on every reload of the ``experiments`` section), on the gateway's shared state: a rule's
throttle bucket is the same bucket whichever arm's rule takes from it.
"""

from __future__ import annotations

from router_core.experiments import Experiment
from router_core.gateway.policy_gate import PolicyGate

__all__ = ["SHADOW", "arm_gates"]

SHADOW = "\x00shadow"  # the shadow policy's gate, beside the arms' (no arm name can start with a NUL)


def arm_gates(experiment: Experiment | None, base: PolicyGate) -> dict[str, PolicyGate]:
    """Each arm's own gate, by arm name, for the arms whose routing section differs from the base config's.

    The shadow policy's, when its routing differs, is under :data:`SHADOW` (an arm's shadow: that arm's).

    Raises:
        PolicyError: An arm's routing file does not load.
    """
    out: dict[str, PolicyGate] = {}
    if experiment is None:
        return out
    for arm in experiment.arms:
        config = arm.router.policy.config
        if config is not None and config.routing != base.config.routing:
            out[arm.name] = PolicyGate.load(config, shared=base.shared, hash_key=base.hash_key)
    shadow = experiment.shadow
    if shadow is not None:
        config = shadow.router.policy.config
        if shadow.arm is not None:
            if shadow.arm in out:
                out[SHADOW] = out[shadow.arm]
        elif config is not None and config.routing != base.config.routing:
            out[SHADOW] = PolicyGate.load(config, shared=base.shared, hash_key=base.hash_key)
    return out
