"""The state of a fleet's breakers, what reads it, and the four helpers every change goes through.

:class:`BoardState` is the base of :class:`router_core.resilience.breakers.BreakerBoard`, which
holds what changes the breakers (attempt outcomes, time, probes, operators, other replicas). Here:
every breaker by scope, the ones not closed (``_hot``: what the per-request reads look at), each
instance's failures in a row and outstanding attempts, 429 holds, probe passes since an opening and
the queue of transitions; the reads of the breaker filter, the state route and metrics; and
``_open``, ``_hold``, ``_reset`` and ``_queue``, which keep all of it consistent.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from router_core.framework.types import Blocked
from router_core.resilience.breaker import Breaker, BreakerState, Scope, Transition
from router_core.resilience.error_share import ErrorShare
from schemas.config.resilience import BreakerSettings
from schemas.fleet import InstanceSpec

__all__ = ["BoardState"]


@dataclass(slots=True)
class _Instance:
    breaker: Breaker
    failures: int = 0
    kinds: list[str] = field(default_factory=list)
    last_answer: float = 0.0
    outstanding: dict[int, tuple[float, Callable[[], None] | None]] = field(default_factory=dict)


class BoardState:
    """The breakers of one gateway's fleet as data, and their reads (built as :class:`BreakerBoard`)."""

    def __init__(self, settings: BreakerSettings, specs: Iterable[InstanceSpec], *, clock: Callable[[], float],
                 enabled: bool = True) -> None:
        self.settings, self._clock, self._enabled = settings, clock, enabled
        specs = list(specs)
        inst, now = settings.instance, clock()

        def breaker(scope: Scope, name: str, s: Any) -> Breaker:
            return Breaker(scope, name, open_s=s.open_s, trial_requests=s.trial_requests, close_after=s.close_after)

        self._instances = {s.id: _Instance(breaker("instance", s.id, inst), last_answer=now) for s in specs}
        self._models = {s.model: breaker("model", s.model, settings.model) for s in specs}
        zones = {s.zone for s in specs}
        self._zones = {z: breaker("zone", z, settings.zone) for z in zones} if len(zones) > 1 else {}
        self._rates: dict[tuple[Scope, str], ErrorShare] = {}
        if settings.model.enabled:
            self._rates.update({("model", m): ErrorShare(settings.model) for m in self._models})
        if settings.zone.enabled:
            self._rates.update({("zone", z): ErrorShare(settings.zone) for z in self._zones})
        self._tokens = itertools.count()
        self._out: list[Transition] = []
        # Breakers not closed, per scope: the filter's per-candidate check is three dict lookups, none when all closed.
        self._hot: dict[Scope, dict[str, Breaker]] = {"instance": {}, "model": {}, "zone": {}}
        self._probe_passes: dict[str, dict[str, int]] = {}  # instance -> probe kind -> passes in a row since opened
        self._probe_results: dict[tuple[str, str], int] = {}  # (instance, kind) -> the prober's result count
        self._members: dict[str, list[str]] = {}  # model -> its instances (whose probe counts its opening resets)
        self._holds: dict[str, float] = {}  # instance -> when its 429 hold ends (its breaker open until then)
        for s in specs:
            self._members.setdefault(s.model, []).append(s.id)

    # -- reads (the breaker filter, the state route, metrics) ------------------------------------

    def blocking(self, spec: InstanceSpec) -> Breaker | None:
        """The first of the instance's, its model's and its zone's breakers that lets nothing through."""
        hot = self._hot
        b = hot["instance"].get(spec.id)
        if b is not None and b.blocks():
            return b
        b = hot["model"].get(spec.model)
        if b is not None and b.blocks():
            return b
        b = hot["zone"].get(spec.zone)
        return b if b is not None and b.blocks() else None

    def blocked(self, specs: Iterable[InstanceSpec]) -> Mapping[str, Blocked] | None:
        """The instances of ``specs`` a breaker lets nothing through to, with the verdict's sentence.

        What the gateway hands a decision (``RequestContext.blocked``), once per request: nothing
        to look up while every breaker is closed (None: none blocks).
        """
        hot = self._hot
        if not (hot["instance"] or hot["model"] or hot["zone"]):
            return None
        out = {}
        for spec in specs:
            b = self.blocking(spec)
            if b is not None:
                what = "open" if b.state is BreakerState.OPEN else "half-open, trial slots taken"
                out[spec.id] = Blocked(b.scope, int(b.state), f"{b.scope} breaker {b.name} {what}: {b.reason}"[:500])
        return out or None

    def wants_trial(self, spec: InstanceSpec) -> bool:
        """True when a breaker of ``spec`` is half-open with a trial slot free (and none blocks it).

        The forwarder then tries ``spec`` first: a half-open instance ranked low (cold after a
        restart) would otherwise never see a trial, and a failed trial still fails over.
        """
        hot = self._hot
        if not (hot["instance"] or hot["model"] or hot["zone"]):
            return False
        chain = [b for b in (hot["instance"].get(spec.id), hot["model"].get(spec.model), hot["zone"].get(spec.zone))
                 if b is not None]
        return bool(chain) and not any(b.blocks() for b in chain) and any(
            b.state is BreakerState.HALF_OPEN for b in chain)

    def breakers(self) -> Iterator[Breaker]:
        """Every breaker: instances, then models, then zones."""
        yield from (i.breaker for i in self._instances.values())
        yield from self._models.values()
        yield from self._zones.values()

    def get(self, scope: str, name: str) -> Breaker | None:
        """One breaker by scope and name."""
        if scope == "instance":
            inst = self._instances.get(name)
            return None if inst is None else inst.breaker
        return (self._models if scope == "model" else self._zones if scope == "zone" else {}).get(name)

    def views(self) -> list[dict[str, Any]]:
        """One row per breaker for ``GET /v1/router/state`` (``breakers``)."""
        now = self._clock()
        return [b.view(now) for b in self.breakers()]

    def held_for(self, instance: str) -> float | None:
        """Seconds left of ``instance``'s 429 hold (None: not held)."""
        until = self._holds.get(instance)
        inst = self._instances.get(instance)
        if until is None or inst is None or inst.breaker.state is not BreakerState.OPEN:
            return None
        return max(0.0, until - self._clock())

    def take_transitions(self) -> list[Transition]:
        """The transitions since the last call, oldest first."""
        out, self._out = self._out, []
        return out

    # -- helpers ----------------------------------------------------------------------------------

    def _open(self, b: Breaker, reason: str, now: float) -> None:
        if not self._enabled:
            return
        self._queue(b.move(BreakerState.OPEN, reason, now))
        if b.scope == "instance":
            for _, abort in list(self._instances[b.name].outstanding.values()):
                if abort is not None:
                    abort()

    def _hold(self, b: Breaker, hold_s: float, now: float) -> None:
        """Hold an instance out for ``hold_s`` (its upstream's 429): its breaker open until then, nothing aborted."""
        if not self._enabled:
            return
        if b.state is BreakerState.OPEN:  # already open (another 429, or failures): open at least as long
            self._holds[b.name] = max(now + hold_s, self._holds.get(b.name, b.since + b.open_s))
            return
        self._holds[b.name] = now + hold_s
        t = b.move(BreakerState.OPEN, f"upstream answered 429: held {hold_s:g} s (Retry-After)", now)
        self._queue(None if t is None else replace(t, hold_s=hold_s))  # the other replicas hold it as long

    def _reset(self, b: Breaker) -> None:
        if b.scope == "instance":
            inst = self._instances[b.name]
            inst.failures, inst.kinds, inst.last_answer = 0, [], self._clock()
            self._holds.pop(b.name, None)
        elif (rate := self._rates.get((b.scope, b.name))) is not None:
            rate.reset()

    def _queue(self, t: Transition | None) -> None:
        if t is None:
            return
        if t.to_state is BreakerState.CLOSED and (b := self.get(t.scope, t.name)) is not None:
            self._reset(b)  # a closed breaker starts counting afresh (the old errors led to the opening)
        if t.to_state is BreakerState.OPEN and t.scope != "zone":  # passes before the failures are no recovery
            for inst in [t.name] if t.scope == "instance" else self._members.get(t.name, []):
                runs = self._probe_passes.get(inst)
                if runs:
                    self._probe_passes[inst] = dict.fromkeys(runs, 0)
        hot = self._hot[t.scope]
        if t.to_state is BreakerState.CLOSED:
            hot.pop(t.name, None)
        elif (b := self.get(t.scope, t.name)) is not None:
            hot[t.name] = b
        self._out.append(t)
