"""What the demo prints as its day unfolds: each event as the gateway sees it, with the app page that shows it.

One line per event, ``HH:MM:SS <what happened>: <page URL>``. The events come from the gateway as
they happen, not from the script: the constraint latches, probe verdicts and breaker transitions
of ``GET /v1/router/state``, the alerts of ``GET /v1/alerts``, and from the store the rules, arms
and shadow that decided the day's traffic; the script's own faults and the feedback that marks a
misroute come from the day's thread. Without the app, the line names the gateway's API route that
answers the same question (the day's window where the route needs one).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from app.run.narrator_lines import _between, _breaker_line, _describe, _fmt
from app.run.narrator_store import StoreChecks
from app.violation_text import holds
from router_core import DECAYING_GAUGES
from schemas.config import ConstraintSpec, RouteLensConfig
from sim.day import Injected
from sim.faults import DEFAULT_PRESSURE
from sim.traffic import TrafficResult
from sim.traffic_report import is_judged_correct

__all__ = ["Narrator"]


_FEEDBACK_TAKEN = (200, 201, 202)


@dataclass(frozen=True, slots=True)
class _Pressure:
    """One kv-pressure fault the script started: its share of the KV cache at its peak, until when."""

    peak: float
    until: datetime | None


class Narrator(StoreChecks):
    """Prints the day's events with links to the pages that show them.

    Args:
        config: The demo's configuration (constraint thresholds, the experiment's arms).
        gateway: The gateway's base URL.
        app: The app's base URL, or None when the demo runs without it.
        speed: How much faster than written the day runs (only to say durations in day time).
        day_s: How long a (sped-up) day lasts: the arms are compared at its noon.
        peak_s: When in the day its traffic peaks (the load is shown then).
        say: Where lines go (``print`` by default).
        now: Wall clock (UTC).
    """

    def __init__(self, config: RouteLensConfig, gateway: str, app: str | None, *, speed: float = 1.0,
                 day_s: float = 240.0, peak_s: float = 60.0, say: Callable[[str], None] | None = None,
                 now: Callable[[], datetime] | None = None) -> None:
        from ingest import HttpTraceStore

        self.config, self.gateway, self.app, self.speed, self.day_s = config, gateway, app, speed, day_s
        self.peak_s = peak_s
        self._say = say or (lambda line: print(line, flush=True))
        self._now = now or (lambda: datetime.now(UTC))
        self._api = HttpTraceStore(gateway, timeout_s=5)
        self._lock = threading.Lock()
        self._constraints: dict[str, ConstraintSpec] = {c.name: c for c in config.constraints}
        self._latch: dict[tuple[str, str], bool] = {}
        self._held: set[tuple[str, str]] = set()
        self._verdict: dict[tuple[str, str], str] = {}
        self._breaker_events: set[str] = set()
        self._alerts: dict[str, dict[str, Any]] = {}
        self._day, self._day_start = -1, self._now()
        self._firsts: set[str] = set()
        self._recent: deque[str] = deque(maxlen=64)
        self._requests = self._errors = self._misroutes = self._shadows_seen = 0
        self._state: dict[str, Any] = {}
        self._pressures: dict[str, list[_Pressure]] = {}

    # -- lines ------------------------------------------------------------------------------------
    def page(self, path: str, api: str, api_query: Mapping[str, str] | None = None, **params: str) -> str:
        """The app page ``path`` with ``params``; without the app, the gateway's ``api`` route with ``api_query``.

        The page's and the route's parameters differ (a page's ``window=15m``, a route's ``start``
        and ``end``; ``instance`` filters a route's traces by the instance that served them).
        """
        if self.app is None:
            query = urlencode({k: v for k, v in (api_query or {}).items() if v})
            return f"{self.gateway}{api}" + (f"?{query}" if query else "")
        query = urlencode({k: v for k, v in params.items() if v})
        return f"{self.app}/{path}" + (f"?{query}" if query else "")

    def day_window(self, end: datetime | None = None) -> dict[str, str]:
        """The API's ``start`` and ``end`` of the day under way (``end``: its scripted end, unless given)."""
        start = self._day_start
        end = start + timedelta(seconds=self.day_s) if end is None else end
        return {"start": start.isoformat(), "end": end.isoformat()}

    def line(self, what: str, url: str) -> None:
        """Print ``HH:MM:SS what: url`` (local time)."""
        with self._lock:
            self._say(f"{datetime.now().strftime('%H:%M:%S')} {what}: {url}")

    def seconds(self, day_s: float) -> str:
        """A duration of the sped-up day, said in the day's own seconds (``--speed 8``: 0.25 s is 2 s)."""
        return f"{day_s * self.speed:g} s"

    def _fleet(self, instance: str) -> str:
        return self.page("fleet", "/v1/router/state", instance=instance, window="15m")

    def _constraints_page(self, instance: str) -> str:
        return self.page("constraints", "/v1/analytics/constraints", self.day_window(), instance=instance,
                         window="15m")

    # -- the day's thread -------------------------------------------------------------------------
    def on_day(self, n: int) -> None:
        """A day begins: summarise the last one, then start counting afresh."""
        if n > 0:
            self.summarise_day()
        with self._lock:
            self._day, self._day_start = n, self._now()
            self._firsts.clear()
            self._requests = self._errors = self._misroutes = self._shadows_seen = 0
        again = " (the script again, another draw of the traffic)" if n else ""
        self.line(f"day {n + 1} begins{again}", self.page("overview", "/v1/analytics/buckets",
                                                          {**self.day_window(), "bucket": "1m"}, window="15m"))

    def on_inject(self, inj: Injected) -> None:
        """The script started a fault (or failed to)."""
        if inj.error is not None:
            self.line(f"script: {inj.spec.kind.value} on {inj.instance} NOT injected ({inj.error})",
                      self._fleet(inj.instance))
            return
        self.line(_describe(inj, self.seconds, self._pressure_held(inj)), self._fleet(inj.instance))

    def _pressure_held(self, inj: Injected) -> float:
        """The KV cache share the instance's other kv-pressure holds now; ``inj``'s own is counted from now on."""
        if inj.spec.kind.value != "kv-pressure":
            return 0.0
        now = self._now()
        live = [p for p in self._pressures.get(inj.instance, []) if p.until is None or p.until > now]
        peak = DEFAULT_PRESSURE if inj.spec.rate is None else inj.spec.rate
        until = None if inj.spec.duration_s is None else now + timedelta(seconds=inj.spec.duration_s)
        self._pressures[inj.instance] = [*live, _Pressure(peak, until)]
        return sum(p.peak for p in live)

    def on_result(self, result: TrafficResult) -> None:
        """One request done (answered or not): count it, and its feedback; the day's first misroute is shown.

        A misroute is what the store counts as one (docs/operators.md): a verdict ``correct=false``
        taken by the gateway, an error's included (the day posts one on each request it can name).
        The line shows one that the model it should have gone to would have avoided.
        """
        first = False
        with self._lock:
            self._requests += 1
            self._errors += result.status == "error"
            if result.request_id:
                self._recent.append(result.request_id)
            if result.feedback_status in _FEEDBACK_TAKEN and not is_judged_correct(result):
                self._misroutes += 1
                if result.status == "ok" and result.expected_model is not None \
                        and result.model not in (None, result.expected_model):
                    first = "misroute" not in self._firsts
                    self._firsts.add("misroute")
        if first and result.request_id:
            self.line(f"feedback marks {result.request_id} a misroute (answer {result.grade}; served by "
                      f"{result.model}, should have gone to {result.expected_model})",
                      self.page("trace", f"/v1/traces/{quote(result.request_id)}", request_id=result.request_id))

    # -- watching the gateway ---------------------------------------------------------------------
    def watch(self, stop: threading.Event) -> None:
        """Poll the gateway until ``stop`` is set (run on a thread of its own)."""
        from ingest import SinkError

        poll_s = max(0.1, 0.5 / self.speed)
        store_every = max(1, round(max(1.0, 4.0 / self.speed) / poll_s))
        n = 0
        while not stop.wait(poll_s):
            n += 1
            try:
                self.check_state(self._api.get_json("/v1/router/state"))
                self.check_alerts(self._api.get_json("/v1/alerts").get("alerts", []))
                if n % store_every == 0:
                    self.check_store()
            except (SinkError, KeyError, TypeError, ValueError):
                continue  # the gateway is busy or going down: the next poll tells

    def check_state(self, state: dict[str, Any]) -> None:
        """Latch, probe-verdict and breaker transitions in one ``/v1/router/state`` body."""
        self._state = state
        for snap in state.get("instances", []):
            inst = snap["instance"]
            stale = snap.get("age_s") if snap.get("stale") else None
            for latch in snap.get("latches", []):
                self._latch_seen(inst, latch, stale)
            for probe in snap.get("probes", []):
                self._probe_seen(inst, probe)
        for event in (state.get("breakers") or {}).get("events", []):
            eid = event.get("event_id", "")
            if eid in self._breaker_events:
                continue
            self._breaker_events.add(eid)
            self.line(_breaker_line(event), self._fleet(event["instance"]) if event.get("instance") else
                      self.page("fleet", "/v1/router/state", window="15m"))

    def _latch_seen(self, inst: str, latch: dict[str, Any], stale_s: float | None = None) -> None:
        """One latch's transition; ``stale_s``: the instance's metrics are that old (its gauges taken toward full)."""
        key, out, value = (inst, latch["constraint"]), bool(latch["out"]), latch.get("value")
        spec = self._constraints.get(latch["constraint"])
        before = self._latch.get(key, False)
        self._latch[key] = out
        if spec is None:
            return
        stale = (f"; no fresh metrics for {stale_s * self.speed:.0f} s, so its gauges are taken toward full"
                 if stale_s is not None and spec.metric in DECAYING_GAUGES else "")
        if out and not before:
            self._held.discard(key)
            # The value is the latest evaluation's, read a poll after the one that broke the latch: shown as what
            # failed only while it still fails (a spike may be over by then: it is said as the value now).
            if value is not None and not holds(spec.op, value, spec.threshold):
                limit, now = f"{spec.metric} {_fmt(value)} {spec.op} {spec.threshold:g}", ""
            else:
                limit, now = f"{spec.metric} {spec.op} {spec.threshold:g}", f"; {_fmt(value)} when read"
            self.line(f"{inst} broke {spec.name} ({limit} failed for {self.seconds(spec.exit_for)}{stale}{now}) -> "
                      f"out of the feasible set", self._constraints_page(inst))
        elif out and key not in self._held and value is not None and spec.enter_bound != spec.threshold \
                and _between(value, spec):
            self._held.add(key)
            self.line(f"{inst} {spec.metric} {_fmt(value)} is back within {spec.threshold:g} but stays out until it "
                      f"holds {spec.enter_bound:g} for {self.seconds(spec.enter_for)} (hysteresis)", self._fleet(inst))
        elif before and not out and value is None:  # an unmeasured window (no requests to it) holds
            self.line(f"{inst} {spec.metric} unmeasured (no requests to it) for {self.seconds(spec.enter_for)} "
                      f"-> back in the feasible set ({spec.name})", self._fleet(inst))
        elif before and not out:
            self.line(f"{inst} {spec.metric} {_fmt(value)} held {spec.op} {spec.enter_bound:g} for "
                      f"{self.seconds(spec.enter_for)} -> back in the feasible set ({spec.name})", self._fleet(inst))

    def _probe_seen(self, inst: str, probe: dict[str, Any]) -> None:
        key, verdict = (inst, probe["kind"]), probe["verdict"]
        before = self._verdict.get(key)
        self._verdict[key] = verdict
        if before is None:  # the first round: one line per instance and kind, as the demo has always printed it
            why = f" ({probe['reason']})" if verdict != "ok" and probe.get("reason") else ""
            with self._lock:
                self._say(f"  probe    {inst:<12} {probe['kind']:<8} {verdict}{why}")
            before = "ok"
        if verdict == before:
            return
        url = self.page("probes", "/v1/probes/verdicts", instance=inst)
        if verdict == "ok":
            back = " -> back in routing" if before == "failed" and probe["kind"] != "latency" else ""
            self.line(f"{inst} {probe['kind']} probe passes again{back}", url)
            return
        why = f" ({probe['reason']})" if probe.get("reason") else ""
        effect = " -> excluded from routing" if verdict == "failed" and probe["kind"] != "latency" else ""
        self.line(f"{inst} {probe['kind']} probe {verdict}{why}{effect}", url)

    def check_alerts(self, alerts: list[dict[str, Any]]) -> None:
        """Alerts that started firing, and those that stopped."""
        firing = {a["fingerprint"]: a for a in alerts if a.get("state") == "firing"}
        for fp, a in firing.items():
            if fp not in self._alerts:
                where = f" on {a['instance']}" if a.get("instance") else ""
                self.line(f"alert {a['name']} firing{where}: {a.get('summary', '')}",
                          self.page("probes", "/v1/alerts", instance=a.get("instance") or ""))
        for fp, a in self._alerts.items():
            if fp not in firing:
                where = f" on {a['instance']}" if a.get("instance") else ""
                self.line(f"alert {a['name']} resolved{where}",
                          self.page("probes", "/v1/alerts", instance=a.get("instance") or ""))
        self._alerts = firing
