"""Every breaker of the fleet (per instance, model and zone), fed by the forwarder's attempt outcomes.

What trips each scope:

- **instance**: ``consecutive_failures`` timeouts or connect errors in a row (seed 000: 3), at once,
  without waiting for a scrape; or a *stall*: ``stall_min_outstanding`` attempts outstanding for
  ``stall_after_s`` with no answer at all (a hung instance never times out before its timeout).
  When it opens, its outstanding attempts are aborted (their ``abort`` callback), so they fail
  over now instead of waiting for the hang to end.
- **model**: a 5xx share above ``threshold`` over ``window_s``, held ``for_s`` (seed 003: 15%, 2 min).
- **zone**: an error share (5xx, timeouts, connect errors) above ``threshold`` held ``for_s``
  (seed 000: 5%); only when the fleet has another zone to move to.

An instance that answers **429** is *held*: its breaker opens for the upstream's ``Retry-After``
(the forwarder parses and bounds it) instead of ``open_s``, without aborting its outstanding
attempts (they were accepted), and goes half-open when the hold is over; the transition carries the
hold, so every replica holds the instance as long. A 429 is neither a failure
in a row nor a pass for the instance; it is no error for its model's or zone's share.

Open breakers go half-open after ``open_s`` (:meth:`BreakerBoard.sweep`, called periodically), let
``trial_requests`` through at a time and close after ``close_after`` consecutive passes; an
instance's and its model's also close after ``close_after`` probe rounds of the instance passed in a
row since they opened (:meth:`BreakerBoard.probe_run`), or at once by an operator
(:meth:`BreakerBoard.close`). Every transition is queued for the gateway
(:meth:`BreakerBoard.take_transitions`: metrics, events, the ``breakers`` channel); a transition
received from another replica is applied with :meth:`BreakerBoard.apply`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from router_core.framework.types import Blocked
from router_core.resilience.breaker import Breaker, BreakerState, Scope, Transition
from router_core.resilience.error_share import ErrorShare
from schemas.config.resilience import BreakerSettings
from schemas.fleet import InstanceSpec

__all__ = ["Admission", "AttemptOutcome", "BreakerBoard"]

# What one attempt came to, as the breakers count it ("answered": an HTTP answer below 500, 429 aside).
AttemptOutcome = Literal["ok", "answered", "http_429", "http_5xx", "timeout", "connect", "aborted"]
_PASSED = ("ok", "answered")
MAX_HOLD_S = 3600.0  # a replica's 429 hold longer than this is not applied (the gateway caps Retry-After at 60 s)


@dataclass(slots=True)
class Admission:
    """One attempt let through: the half-open breakers whose trial slot it holds."""

    spec: InstanceSpec
    token: int
    trials: tuple[Breaker, ...] = ()


@dataclass(slots=True)
class _Instance:
    breaker: Breaker
    failures: int = 0
    kinds: list[str] = field(default_factory=list)
    last_answer: float = 0.0
    outstanding: dict[int, tuple[float, Callable[[], None] | None]] = field(default_factory=dict)


class BreakerBoard:
    """The breakers of one gateway's fleet.

    Args:
        settings: The ``resilience.breakers`` section.
        specs: The fleet.
        clock: Monotonic seconds (injected; tests advance it).
        enabled: False: nothing ever opens (``resilience.enabled``).
    """

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

    # -- the forwarder's side ---------------------------------------------------------------------

    def admit(self, spec: InstanceSpec, abort: Callable[[], None] | None = None) -> Admission | None:
        """Let one attempt to ``spec`` through (None: a breaker is open or has no free trial slot).

        ``abort`` is called if the instance's breaker opens while the attempt is outstanding.
        """
        inst = self._instances.get(spec.id)
        chain = [b for b in (None if inst is None else inst.breaker, self._models.get(spec.model),
                             self._zones.get(spec.zone)) if b is not None]
        trials: tuple[Breaker, ...] = ()
        if any(b.state is not BreakerState.CLOSED for b in chain):  # all closed (the usual): nothing to take
            if any(b.blocks() for b in chain):
                return None
            trials = tuple(b for b in chain if b.state is BreakerState.HALF_OPEN and b.take_trial())
        token = next(self._tokens)
        if inst is not None:
            inst.outstanding[token] = (self._clock(), abort)
        return Admission(spec, token, trials)

    def done(self, adm: Admission, outcome: AttemptOutcome, *, hold_s: float = 0.0) -> None:
        """Count one attempt's outcome; may open, reopen or close breakers.

        ``hold_s``: an ``http_429``'s hold, the seconds its instance is held out (its ``Retry-After``).
        """
        now, spec = self._clock(), adm.spec
        inst = self._instances.get(spec.id)
        if inst is not None:
            inst.outstanding.pop(adm.token, None)
        if outcome == "aborted":
            for b in adm.trials:
                self._queue(b.trial_done(False, now, "aborted"))
            return
        limited = outcome == "http_429"
        for b in adm.trials:  # a 429 passes a model's or zone's trial; the instance's is reopened by its hold
            if not (limited and b.scope == "instance"):
                self._queue(b.trial_done(outcome in _PASSED or limited, now, outcome))
        if inst is not None:
            if limited:  # alive (no stall), but no pass: its failures in a row stay as they are
                inst.last_answer = now
                self._hold(inst.breaker, hold_s, now)
            elif outcome in ("timeout", "connect"):
                inst.failures += 1
                inst.kinds = [*inst.kinds[-8:], outcome]
                n = self.settings.instance.consecutive_failures
                if inst.failures >= n and inst.breaker.state is BreakerState.CLOSED:
                    kinds = sorted(set(inst.kinds[-n:]))
                    self._open(inst.breaker, f"{inst.failures} consecutive {' or '.join(kinds)} errors", now)
            else:
                inst.failures, inst.kinds, inst.last_answer = 0, [], now
        keyed: tuple[tuple[tuple[Scope, str], bool], ...] = (
            (("model", spec.model), outcome == "http_5xx"),
            (("zone", spec.zone), outcome in ("http_5xx", "timeout", "connect")))
        for key, error in keyed:
            rate = self._rates.get(key)
            if rate is None:
                continue
            rate.add(now, error)
            rb = self.get(*key)
            if rb is not None and rb.state is BreakerState.CLOSED and (why := rate.tripped(now)) is not None:
                self._open(rb, why, now)

    def sweep(self) -> None:
        """Time-driven transitions: open -> half-open, stalled instances and stalled trials, held error shares."""
        now = self._clock()
        holds = self._holds
        for b in self.breakers():
            if b.scope != "instance" or b.name not in holds:
                self._queue(b.due(now))
        for name, until in list(holds.items()):
            b = self._instances[name].breaker
            if b.state is not BreakerState.OPEN or now >= until:
                del holds[name]
                if b.state is BreakerState.OPEN:
                    self._queue(b.move(BreakerState.HALF_OPEN, f"429 hold over: trying {b.trial_requests} "
                                                               f"request(s) at a time", now))
        stall, least = self.settings.instance.stall_after_s, self.settings.instance.stall_min_outstanding
        if stall is not None:
            for inst in self._instances.values():
                b = inst.breaker
                old = sum(1 for started, _ in inst.outstanding.values() if now - started >= stall)
                if b.state is BreakerState.CLOSED and old >= least and now - inst.last_answer >= stall:
                    self._open(b, f"{old} attempts outstanding, none answered for {now - inst.last_answer:.1f} s", now)
                elif b.state is BreakerState.HALF_OPEN and b.trials_out and old:
                    self._open(b, f"half-open trial unanswered for {stall:g} s", now)
        for (scope, name), rate in self._rates.items():
            rb = self.get(scope, name)
            if rb is not None and rb.state is BreakerState.CLOSED and (why := rate.tripped(now)) is not None:
                self._open(rb, why, now)

    # -- operators and other replicas -------------------------------------------------------------

    def close(self, scope: str, name: str, reason: str = "closed by an operator") -> Breaker | None:
        """Close one breaker now (None: no such breaker)."""
        b = self.get(scope, name)
        if b is not None:
            self._reset(b)
            self._queue(b.move(BreakerState.CLOSED, reason, self._clock()))
        return b

    def probe_run(self, spec: InstanceSpec, kind: str, results: int, ok_run: int) -> list[Breaker]:
        """Take the prober's count for one probe kind of ``spec``; close what enough passes in a row earn.

        Seed 003's recovery rule ("探针连续10次通过"): the instance's breaker and its model's close
        after their own ``close_after`` probe rounds of the instance passed in a row since they
        opened. ``results`` is how many results of ``kind`` the prober has had for the instance and
        ``ok_run`` how many of the latest were ``ok`` in a row (the prober's feed publishes both, a
        poll may cover several results). A round passed when every kind probed passed: the count is
        the smallest over the kinds. A failing result (``failed``, or ``degraded``: slow or drifting)
        starts its kind's count again; so does a breaker opening. The first count seen of a kind says
        nothing about when its passes happened, so it starts the kind at 0. Returns the breakers closed.
        """
        key = (spec.id, kind)
        last = self._probe_results.get(key)
        self._probe_results[key] = results
        runs = self._probe_passes.setdefault(spec.id, {})
        if last is None or results < last:  # first sight, or a prober that restarted: no pass known since when
            runs[kind] = 0
        elif (new := results - last) > 0:
            runs[kind] = runs.get(kind, 0) + new if ok_run >= new else ok_run
        runs.setdefault(kind, 0)
        n = min(runs.values())
        closed = []
        for scope, name in (("instance", spec.id), ("model", spec.model)):
            b = self.get(scope, name)
            if b is not None and b.state is not BreakerState.CLOSED and n >= b.close_after:
                closed.append(self.close(scope, name, f"{n} probe rounds in a row passed on {spec.id}") or b)
        return closed

    def apply(self, message: dict[str, Any]) -> bool:
        """Apply another replica's transition (a ``breakers`` channel message); False if not applicable.

        A kept one (a replica starting) carries ``age_s``: the breaker moved that long ago.
        """
        b = self.get(str(message.get("scope")), str(message.get("name")))
        try:
            to = BreakerState[str(message.get("to", "")).upper()]
        except KeyError:
            return False
        if b is None:
            return False
        if to is BreakerState.CLOSED:
            self._reset(b)
        age = message.get("age_s")
        at = self._clock() - (age if isinstance(age, (int, float)) and age > 0 else 0.0)
        hold = message.get("hold_s")
        if (to is BreakerState.OPEN and b.scope == "instance" and isinstance(hold, (int, float))
                and 0 < hold <= MAX_HOLD_S):  # a 429's hold: open as long as its Retry-After, here too
            self._holds[b.name] = at + hold
        self._queue(b.move(to, f"from replica {message.get('origin')}: {message.get('reason', '')}"[:300],
                           at, remote=True))
        return True

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
