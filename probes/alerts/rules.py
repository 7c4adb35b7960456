"""Alert rules evaluated over probe results and verdicts, Prometheus-like: inactive → pending → firing.

A rule's condition is kept per (rule, instance, kind) as a window of its last ``n`` observations:
a verdict rule holds for an observation when the instance's hysteresis status for that kind is
the rule's verdict or worse, a metric rule when ``value``/``latency_ms`` ``op`` ``threshold``. A
verdict rule on a kind that judges answers (semantic, latency) holds only while the latest failure
of that kind is such a judgement (:func:`probes.evidence.is_evidence`): an instance that crashed
(refused connections, 5xx) fails its semantic probe too, but that is no drift and raises no drift
alert; its syntax probe (and a kindless rule) reports it, and the router's breaker acts on it. The
condition holds when it held in at least ``k`` of the window. An alert whose condition holds is
``pending`` and turns ``firing`` once it has held for ``for_s`` (evaluated every tick); it resolves
when the condition stops holding. A watchdog rule holds when the prober has produced nothing for
``for_s`` and fires at once (the silence already lasted ``for_s``). An alert is identified by the
fingerprint of (rule name, instance, kind), so repeated observations never duplicate it.
"""

from __future__ import annotations

import hashlib
import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from probes.evidence import is_evidence
from probes.verdicts import RANK
from schemas.common import ProbeVerdict
from schemas.config.probes import AlertRule
from schemas.probe import ProbeResult, ProbeStatus

__all__ = ["Alert", "RuleBook", "Transition", "fingerprint"]

WATCHDOG = "watchdog"
_OPS: dict[str, Callable[[float, float], bool]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt,
                                                   ">=": operator.ge}
Key = tuple[str, str, str]


def fingerprint(rule: str, instance: str, kind: str) -> str:
    """The alert's identity: 16 hex digits of a hash of (rule name, instance, kind)."""
    return hashlib.sha256(f"{rule}\0{instance}\0{kind}".encode()).hexdigest()[:16]


@dataclass
class Alert:
    """One active (pending or firing) alert."""

    rule: AlertRule
    instance: str
    model: str
    kind: str
    state: Literal["pending", "firing"]
    active_at: float
    active_since: datetime
    value: float | None = None
    reason: str = ""
    fired_at: datetime | None = None
    last_sent: float | None = None

    @property
    def fingerprint(self) -> str:
        """The dedup key of this alert."""
        return fingerprint(self.rule.name, self.instance, self.kind)

    def description(self) -> str:
        """What was seen: where, the value and the latest result's reason (baseline, error, similarity)."""
        value = "" if self.value is None else f" value {self.value:g}"
        where = f"{self.instance} ({self.model}) {self.kind}" if self.instance else "the prober"
        return f"{where}:{value} {self.reason}".strip()

    def labels(self) -> dict[str, str]:
        """Alertmanager labels: alertname, instance, model, kind, severity and the rule's own (empty dropped)."""
        labels = {"alertname": self.rule.name, "instance": self.instance, "model": self.model, "kind": self.kind,
                  "severity": self.rule.severity, **self.rule.labels}
        return {k: v for k, v in labels.items() if v}


@dataclass(frozen=True)
class Transition:
    """What one evaluation changed: an alert started firing, was re-sent, or resolved (``at``: wall time)."""

    action: Literal["firing", "repeat", "resolved"]
    alert: Alert
    at: datetime


class RuleBook:
    """The state of every rule over every (instance, kind): observations in, transitions out.

    Args:
        rules: The alert rules.
        clock: Monotonic seconds (``for_s``, repeat intervals, the watchdog).
        last_result_at: When (on ``clock``) the prober produced its latest result, None if never.
    """

    def __init__(self, rules: list[AlertRule], *, clock: Callable[[], float],
                 last_result_at: Callable[[], float | None]) -> None:
        self._rules = {r.name: r for r in rules}
        self._clock = clock
        self._last_result_at = last_result_at
        self._started = clock()
        self._windows: dict[Key, deque[bool]] = {}
        self._latest: dict[Key, ProbeResult] = {}
        self._status: dict[tuple[str, str], ProbeStatus] = {}
        self._judged: dict[tuple[str, str], bool] = {}  # the latest failure judged what its kind is about
        self._alerts: dict[Key, Alert] = {}

    def observe(self, result: ProbeResult, status: ProbeStatus | None) -> None:
        """Take one result and its (instance, kind)'s hysteresis status (None: the last one seen)."""
        skey = (result.instance, result.kind.value)
        if status is not None:
            self._status[skey] = status
        current = self._status.get(skey)
        if result.verdict is not ProbeVerdict.OK:
            self._judged[skey] = is_evidence(result)
        judged = self._judged.get(skey, True)
        for rule in self._rules.values():
            if rule.kind == WATCHDOG or (rule.kind is not None and rule.kind != result.kind):
                continue
            key = (rule.name, result.instance, result.kind.value)
            window = self._windows.setdefault(key, deque(maxlen=rule.n))
            window.append(_holds(rule, result, current, judged))
            self._latest[key] = result

    def forget(self, instance: str) -> None:
        """Drop an instance that left the fleet; its alerts resolve at the next evaluation."""
        for key in [k for k in self._windows if k[1] == instance]:
            del self._windows[key]
            self._latest.pop(key, None)
        for skey in [k for k in self._status if k[0] == instance]:
            del self._status[skey]
        for skey in [k for k in self._judged if k[0] == instance]:
            del self._judged[skey]

    def active(self) -> list[Alert]:
        """Pending and firing alerts, by rule then instance."""
        return [self._alerts[k] for k in sorted(self._alerts)]

    def evaluate(self, wall: datetime) -> list[Transition]:
        """One tick: move alerts between pending, firing and resolved; return what changed."""
        now = self._clock()
        holding: dict[Key, tuple[str, float | None, str]] = {}
        for key, window in self._windows.items():
            if sum(window) >= self._rules[key[0]].k:
                latest = self._latest[key]
                holding[key] = (latest.model, _value(self._rules[key[0]], latest), latest.reason)
        for rule in self._rules.values():
            if rule.kind == WATCHDOG:
                last = self._last_result_at()
                silent = now - (last if last is not None else self._started)
                if silent >= rule.for_s:
                    holding[(rule.name, "", WATCHDOG)] = ("", silent, f"no probe result for {silent:.0f} s")
        out: list[Transition] = []
        for key, (model, value, reason) in holding.items():
            rule = self._rules[key[0]]
            alert = self._alerts.get(key)
            if alert is None:
                alert = self._alerts[key] = Alert(rule, key[1], model, key[2], "pending", now, wall)
            alert.value, alert.reason, alert.model = value, reason, model or alert.model
            wait = 0.0 if rule.kind == WATCHDOG else rule.for_s
            if alert.state == "pending" and now - alert.active_at >= wait:
                alert.state, alert.fired_at, alert.last_sent = "firing", wall, now
                out.append(Transition("firing", alert, wall))
            elif alert.state == "firing" and alert.last_sent is not None \
                    and now - alert.last_sent >= rule.repeat_interval_s:
                alert.last_sent = now
                out.append(Transition("repeat", alert, wall))
        for key in [k for k in self._alerts if k not in holding]:
            alert = self._alerts.pop(key)
            if alert.state == "firing":
                out.append(Transition("resolved", alert, wall))
        return out


def _value(rule: AlertRule, result: ProbeResult) -> float | None:
    return result.latency_ms if rule.metric == "latency_ms" else result.value


def _holds(rule: AlertRule, result: ProbeResult, status: ProbeStatus | None, judged: bool) -> bool:
    if rule.verdict is not None:
        if rule.kind is not None and not judged:
            return False  # the verdict failed because the instance gave no answer: not this kind's fault
        return status is not None and RANK[status.verdict] >= RANK[rule.verdict]
    value = _value(rule, result)
    if value is None or rule.op is None or rule.threshold is None:
        return False
    return _OPS[rule.op](value, rule.threshold)
