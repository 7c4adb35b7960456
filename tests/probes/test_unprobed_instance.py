"""An instance without probe verdicts (never probed, or not of every kind) is not held out by the probe filter."""

from __future__ import annotations

from datetime import timedelta

from schemas.probe import ProbeStatus
from tests.router_core.conftest import FLEET, NOW, decide, healthy, make_config, snap


def failed(kind: str) -> ProbeStatus:
    return ProbeStatus(kind=kind, verdict="failed", since=NOW - timedelta(seconds=5), value=0.0, threshold=1.0)


def test_an_instance_never_probed_stays_feasible_while_probed_ones_fail() -> None:
    fleet = [{**FLEET[0], "engine": "external", "probes": False}, *FLEET[1:]]
    state = healthy()
    state["big-a"] = snap("big-a", kv=None, queue=None, age=None, engine="external")  # no scrape, no verdict
    for iid in ("big-b", "small-a"):
        state[iid] = snap(iid, probes=[failed("syntax")])
    ranked, trace = decide(state, make_config(fleet={"instances": fleet}))
    cand = next(c for c in trace.candidates if c.instance == "big-a")
    assert not any(v.constraint == "probe" for v in cand.violations)
    assert ranked == ["big-a"] and trace.selected_instance == "big-a"  # the probed ones failed: out


def test_an_instance_probed_for_latency_only_is_not_held_out_for_lacking_a_syntax_verdict() -> None:
    state = healthy()
    ok_latency = ProbeStatus(kind="latency", verdict="ok", since=NOW, value=90.0, threshold=120.0)
    state["big-a"] = snap("big-a", kv=0.5, probes=[ok_latency])
    _, trace = decide(state)
    cand = next(c for c in trace.candidates if c.instance == "big-a")
    assert cand.feasible and cand.violations == []
