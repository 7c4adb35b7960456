"""How the narrator says an event: the script's faults, a breaker's transition, a gauge's value and hysteresis band.

Functions of their arguments alone, no state: :class:`app.run.narrator.Narrator` prints the lines they make.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from schemas.config import ConstraintSpec
from sim.day import Injected
from sim.faults import DEFAULT_PRESSURE


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _describe(inj: Injected, seconds: Callable[[float], str], held: float = 0.0) -> str:
    """The script's fault as said; ``held``: the KV cache share other kv-pressure on the instance holds now."""
    spec = inj.spec
    lasting = f" for {seconds(spec.duration_s)}" if spec.duration_s is not None else ""
    match spec.kind.value:
        case "kv-pressure":
            peak = DEFAULT_PRESSURE if spec.rate is None else spec.rate
            if held > 0:  # the simulator adds the shares: a burst on top of a batch job holds both
                return (f"script: a burst takes another {peak:.0%} of {inj.instance}'s KV cache on top of the batch "
                        f"job ({held + peak:.0%} in all){lasting} (load the router does not send)")
            return (f"script: a neighbour's batch job takes up to {peak:.0%} of {inj.instance}'s KV cache{lasting} "
                    f"(load the router does not send)")
        case "drift":
            return f"script: {inj.instance} starts answering off topic (semantic drift){lasting}; HTTP stays 200"
        case "crash":
            return f"script: {inj.instance}'s process crashes{lasting}"
        case kind:
            return f"script: {kind} on {inj.instance}{lasting}"


_BREAKER = re.compile(r"^(?P<scope>\w+) breaker (?P<name>\S+): (?P<was>\w+) -> (?P<now>\w+)(?: \((?P<why>.*)\))?$")
_BREAKER_EFFECT = {"open": "its requests go elsewhere", "half_open": "trial requests test it",
                   "closed": "back in rotation"}


def _breaker_line(event: dict[str, Any]) -> str:
    """``coder-6b-b breaker closed -> open (3 consecutive connect errors): its requests go elsewhere``."""
    message = str(event.get("message", "breaker"))
    m = _BREAKER.match(message)
    if m is None:
        return message
    scope = "" if m["scope"] == "instance" else f"{m['scope']} "
    why = f" ({m['why']})" if m["why"] else ""
    effect = _BREAKER_EFFECT.get(m["now"])
    return f"{m['name']} {scope}breaker {m['was']} -> {m['now']}{why}" + (f" -> {effect}" if effect else "")


def _between(value: float, spec: ConstraintSpec) -> bool:
    """True when ``value`` meets the threshold again but not yet the re-entry bound (the hysteresis band)."""
    low, high = sorted((spec.enter_bound, spec.threshold))
    return low < value <= high if spec.op in ("<=", "<") else low <= value < high
