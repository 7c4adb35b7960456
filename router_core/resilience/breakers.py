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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from router_core.resilience.board_state import BoardState
from router_core.resilience.breaker import Breaker, BreakerState, Scope
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


class BreakerBoard(BoardState):
    """The breakers of one gateway's fleet (their state and reads: :class:`BoardState`).

    Args:
        settings: The ``resilience.breakers`` section.
        specs: The fleet.
        clock: Monotonic seconds (injected; tests advance it).
        enabled: False: nothing ever opens (``resilience.enabled``).
    """

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

