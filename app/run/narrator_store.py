"""The narrator's reads of the trace store: the day's first rule route and shadow decision, the arms at noon.

These are the events only the store knows (the gateway's state has no rule, arm or shadow), so
they are looked for every few seconds rather than seen as they happen; see :mod:`app.run.narrator`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol
from urllib.parse import quote, urlencode

from schemas.config import RouteLensConfig

__all__ = ["NO_RULE", "StoreChecks"]

NO_RULE = "auto"  # the rule of a trace no rule of the policy matched (the scores decided)
_SHADOW_LOOKUPS = 8  # traces read per store check to find a shadow decision (one suffices)
_RULE_LOOKUPS = 5  # a rule's newest traces read to show one an instance answered (a degraded target's else)


class _Api(Protocol):
    def get_json(self, path: str) -> Any: ...


class StoreChecks:
    """What :class:`app.run.narrator.Narrator` reads from the store (a mixin: it owns the state used here)."""

    config: RouteLensConfig
    day_s: float
    peak_s: float
    _api: _Api
    _lock: threading.Lock
    _firsts: set[str]
    _recent: deque[str]
    _day: int
    _day_start: datetime
    _requests: int
    _errors: int
    _misroutes: int
    _shadows_seen: int
    _now: Callable[[], datetime]
    _state: dict[str, Any]  # the last GET /v1/router/state body

    def page(self, path: str, api: str, api_query: Mapping[str, str] | None = None, **params: str) -> str:
        """The app page (see :meth:`app.run.narrator.Narrator.page`)."""
        raise NotImplementedError

    def day_window(self, end: datetime | None = None) -> dict[str, str]:
        """The day's ``start`` and ``end`` (see :meth:`app.run.narrator.Narrator.day_window`)."""
        raise NotImplementedError

    def line(self, what: str, url: str) -> None:
        """Print one event line (see :meth:`app.run.narrator.Narrator.line`)."""
        raise NotImplementedError

    def check_store(self) -> None:
        """The day's firsts that only the store knows: a rule's route, a shadow decision; the arms at noon."""
        start = self._day_start
        since = start.isoformat()
        state_rules = self._rules()
        for rule in state_rules:
            tag = f"rule:{rule}"
            if tag in self._firsts:
                continue
            found = self._api.get_json("/v1/traces?" + urlencode({"rule": rule, "start": since,
                                                                   "limit": _RULE_LOOKUPS}))
            items = found.get("items", [])
            if items:
                self._firsts.add(tag)
                top = next((t for t in items if t.get("selected_model")), items[0])
                self.line(f"rule {rule} {self._routed(top)}",
                          self.page("decisions", "/v1/traces", {"rule": rule, **self.day_window()}, rule=rule,
                                    window="15m"))
        if "shadow" not in self._firsts:
            self._find_shadow()
        if "peak" not in self._firsts and self._now() - start >= timedelta(seconds=self.peak_s):
            self._firsts.add("peak")
            self._peak()
        if "arms" not in self._firsts and self._now() - start >= self._half_day():
            self._firsts.add("arms")
            self.compare_arms(start, self._now())

    def _routed(self, summary: dict[str, Any]) -> str:
        """``routes req_… to MODEL (...)``; with no model selected, the degraded target of the chain that answered.

        That target is the last of the trace's ``policy.chain_used`` when no attempt was to it (it
        is no model: the chain's non-LLM end, the seed's ``legacy-rule-engine``).
        """
        rid, why = summary["request_id"], "the policy, before any scoring"
        if summary.get("selected_model"):
            return f"routes {rid} to {summary['selected_model']} ({why})"
        trace = self._api.get_json(f"/v1/traces/{quote(rid)}")
        tried = {a.get("model") for a in trace.get("attempts") or []}
        used = [t for t in (trace.get("policy") or {}).get("chain_used") or [] if t not in tried]
        if used:
            return f"routes {rid} to {used[-1]} ({why}; no instance answered, so its chain's degraded end did)"
        return f"matched {rid} ({why}; no instance answered it: HTTP {summary.get('http_status', '?')})"

    def _half_day(self) -> timedelta:
        return timedelta(seconds=self.day_s / 2)

    def _rules(self) -> list[str]:
        return [r["name"] for r in (self._state.get("policy") or {}).get("rules", [])]

    def _peak(self) -> None:
        """The load at the day's busiest hour, instance by instance: why the candidates' scores differ."""
        shown = []
        for snap in self._state.get("instances", []):
            kv = snap.get("kv_cache_usage")
            if snap.get("stale"):  # its last scrape is old (a crash): those figures are not its load now
                shown.append(f"{snap['instance']} no fresh metrics for {float(snap.get('age_s') or 0):.0f} s")
                continue
            shown.append(f"{snap['instance']} {snap.get('running') or 0:g} running, {snap.get('queue') or 0:g} "
                         f"waiting, KV {'-' if kv is None else f'{kv:.0%}'}")
        if shown:
            self.line("the traffic's peak: " + "; ".join(shown) + " (the scores differ with the load)",
                      self.page("fleet", "/v1/router/state", window="15m"))

    def _find_shadow(self) -> None:
        """Show a shadow decision of the day: one that would have routed elsewhere, else any (once a few agreed)."""
        with self._lock:
            ids = list(self._recent)[-_SHADOW_LOOKUPS:]
        for rid in ids:
            shadow = self._api.get_json(f"/v1/traces/{quote(rid)}").get("shadow")
            if not shadow:
                continue
            self._shadows_seen += 1
            if shadow.get("flipped") or self._shadows_seen >= _SHADOW_LOOKUPS:
                self._firsts.add("shadow")
                flip = (f"would have sent it to {shadow.get('selected_instance')}" if shadow.get("flipped")
                        else "agrees with the live choice")
                self.line(f"shadow {shadow['router_version']} decided {rid} beside the live policy and {flip}",
                          self.page("experiments", f"/v1/traces/{quote(rid)}", window="15m"))
                return

    def compare_arms(self, start: datetime, end: datetime) -> None:
        """One line comparing the experiment's first two arms between ``start`` and ``end``."""
        exp = self.config.experiments
        if exp is None or len(exp.arms) < 2:
            return
        a, b = exp.arms[0].name, exp.arms[1].name
        query = {"a": a, "b": b, "by": "arm", "start": start.isoformat(), "end": end.isoformat()}
        report = self._api.get_json("/v1/analytics/compare?" + urlencode(query))
        metrics = report.get("metrics", {})
        shown = []
        for name in ("misroute_rate", "cost_per_request", "error_rate"):
            m = metrics.get(name) or {}
            if m.get("a") is not None and m.get("b") is not None:
                shown.append(f"{name} {m['a']:.3g} vs {m['b']:.3g}")
        self.line(f"arms {a} vs {b} so far today ({report.get('n_a', 0)} vs {report.get('n_b', 0)} requests): "
                  + ("; ".join(shown) or "no figures yet"),
                  self.page("experiments", "/v1/analytics/compare", query, a=a, b=b, by="arm", window="15m"))

    def summarise_day(self) -> None:
        """The day that just ended: requests, errors, misroutes, the rules' share; then the arms over the whole day.

        Its misroutes are the verdicts ``correct=false`` the day posted, an error's included: what
        ``GET /v1/analytics/misroutes`` and the arms' misroute rate count over the day.
        """
        with self._lock:
            requests, errors, misroutes, start = self._requests, self._errors, self._misroutes, self._day_start
        end = self._now()
        ruled = ""
        try:
            edges = self._api.get_json("/v1/analytics/traffic?" + urlencode(
                {"start": start.isoformat(), "end": end.isoformat()})).get("edges", [])
            total = sum(int(e["requests"]) for e in edges)
            by_rule = sum(int(e["requests"]) for e in edges if e.get("rule") not in (None, "", NO_RULE))
            if total:
                ruled = f", {by_rule} ({by_rule / total:.0%}) routed by a rule of the policy"
        except Exception:  # noqa: BLE001  (a summary line is not worth stopping the day for)
            pass
        self.line(f"day {self._day + 1} over: {requests} requests ({errors} errors){ruled}, {misroutes} marked "
                  f"misroutes by feedback", self.page("topology", "/v1/analytics/traffic", self.day_window(end),
                                                      window="15m"))
        try:
            self.compare_arms(start, end)
        except Exception:  # noqa: BLE001
            pass
