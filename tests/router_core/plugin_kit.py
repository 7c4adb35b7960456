"""Builders shared by the per-plugin tests: plugins through the registry, candidates, router configs, steps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import mmh3
import pytest

from router_core.decide.builtin import builtin_registry
from router_core.decide.decision import DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.decide.router import Router
from router_core.errors import PluginConfigError
from router_core.framework import Candidate, Handle
from router_core.state.staleness import effective_state
from schemas import InstanceSnapshot, Outcome, OutcomeStatus, RequestFeatures
from schemas.config import ModelProfile, PluginSpec, RouteLensConfig, ScrapeSettings
from schemas.fleet import InstanceSpec
from schemas.trace import DecisionStep, DecisionTrace
from tests.router_core.conftest import NOW, features, make_config

QUEUE_CAP = 10.0  # scoring.queue_norm's default: what missing or ageing queue/running gauges decay toward


def build(type_: str, name: str | None = None, profiles: Mapping[str, ModelProfile] | None = None,
          **parameters: Any) -> Any:
    """One plugin, built the way the router builds it: through a fresh builtin registry."""
    spec = PluginSpec(type=type_, name=name, parameters=parameters)
    return builtin_registry().create(spec, Handle(models=dict(profiles or {})))


@dataclass(frozen=True)
class BadParams:
    """A parameter set the plugin's ``Params`` must refuse, and the (dotted) field the error must name.

    An empty field: the whole parameter set (a model-level validator refused it).
    """

    id: str
    parameters: dict[str, Any]
    field: str


def assert_refused(type_: str, case: BadParams) -> None:
    """``registry.create`` raises PluginConfigError naming ``name/type`` and ``parameters.<field>``."""
    with pytest.raises(PluginConfigError) as info:
        builtin_registry().create(PluginSpec(type=type_, name="under-test", parameters=case.parameters), Handle())
    err = info.value
    assert err.typed_name == f"under-test/{type_}"
    field = ("parameters", *case.field.split(".")) if case.field else ("parameters",)
    assert [loc for loc, _ in err.located] == [field]
    assert f"{'.'.join(field)} (under-test/{type_})" in str(err)


def candidate(iid: str = "i", model: str = "m", *, age: float | None = 0.5, spec: Mapping[str, Any] | None = None,
              **gauges: Any) -> Candidate:
    """A candidate scraped ``age`` seconds before NOW (None: never), with default scrape settings."""
    values = {"kv_cache_usage": 0.1, "queue": 0.0, "running": 0.0} | gauges
    snap = InstanceSnapshot(instance=iid, model=model, scraped_at=None if age is None else NOW - timedelta(seconds=age),
                            **values)
    inst = InstanceSpec(id=iid, model=model, url="http://127.0.0.1:1", **dict(spec or {}))
    return Candidate(inst, snap, effective_state(snap, NOW, ScrapeSettings(), QUEUE_CAP))


def context(*, tokens: int = 100, max_tokens: int | None = None, intent: str | None = None,
            quality: Mapping[tuple[str, str], float] | None = None, request_id: str = "r1") -> DecisionContext:
    """The decision context at NOW."""
    return DecisionContext(request_id=request_id, features=features(tokens=tokens, max_tokens=max_tokens),
                           intent=intent, now=NOW, quality=dict(quality or {}))


def instance(iid: str, model: str = "m", **kw: Any) -> dict[str, Any]:
    """A fleet entry."""
    return {"id": iid, "model": model, "url": "http://127.0.0.1:1", **kw}


def plugins_config(plugins: list[dict[str, Any]] | None, *, instances: list[dict[str, Any]] | None = None,
                   sections: Mapping[str, Any] | None = None, **router: Any) -> RouteLensConfig:
    """A configuration whose pipeline is exactly ``router.plugins`` (None: derived from the sections).

    ``router`` keywords go to the ``router`` section, ``sections`` are other top-level sections.
    """
    overrides: dict[str, Any] = {**(sections or {}), "router": {"plugins": plugins, **router}}
    if instances is not None:
        overrides["fleet"] = {"instances": instances}
    return make_config(**overrides)


def fleet_state(config: RouteLensConfig, **per_instance: Mapping[str, Any]) -> dict[str, InstanceSnapshot]:
    """Fresh, idle snapshots of every instance of ``config`` (age 0.5 s), with per-instance overrides."""
    out = {}
    for spec in config.fleet.instances:
        values: dict[str, Any] = {"kv_cache_usage": 0.1, "queue": 0.0, "running": 0.0, "age": 0.5}
        values |= per_instance.get(spec.id.replace("-", "_"), {})
        age = values.pop("age")
        out[spec.id] = InstanceSnapshot(instance=spec.id, model=spec.model,
                                        scraped_at=None if age is None else NOW - timedelta(seconds=age), **values)
    return out


def step(trace: DecisionTrace, name: str) -> DecisionStep:
    """The one step called ``name``."""
    (found,) = [s for s in trace.decision_trace if s.step == name]
    return found


def weights(trace: DecisionTrace) -> list[tuple[str, float, str]]:
    """``(name, weight, scorer)`` of every score term in force."""
    return [(w.name, w.weight, w.scorer) for w in trace.score_weights]


def terms(trace: DecisionTrace) -> dict[str, list[float]]:
    """Score terms per candidate instance."""
    return {c.instance: c.score_terms for c in trace.candidates}


def assert_filter_step(trace: DecisionTrace, name: str, type_: str, *, kept: int, rejected: list[str]) -> None:
    """The runner's step for filter ``name``: typed name, kept count, rejected ids in candidate order."""
    s = step(trace, f"filter/{name}")
    assert (s.kind, s.plugin) == ("filter", f"{name}/{type_}")
    assert s.rejected == rejected
    assert s.value == float(kept) and s.reason == f"kept {kept}, rejected {len(rejected)}"


def route(router: Router, state: Mapping[str, InstanceSnapshot], *, feats: RequestFeatures | None = None,
          request_id: str = "r1", intent: str | None = None, now: datetime = NOW,
          quality: Mapping[tuple[str, str], float] | None = None) -> tuple[list[str], DecisionTrace]:
    """One decision by an existing ``router`` (its memo kept between calls), and its trace."""
    f = feats or features()
    rec = TraceRecorder(request_id=request_id, ts=now, router_version="t", policy_hash=router.policy.hash,
                        query_hash="sha256:" + "0" * 64, features=f, intent=intent)
    decision = router.decide(DecisionContext(request_id=request_id, features=f, intent=intent, now=now,
                                             quality=dict(quality or {})), state)
    rec.record_decision(decision)
    return [s.id for s in decision.targets], rec.finish(Outcome(status=OutcomeStatus.OK, http_status=200,
                                                                total_ms=1.0))


def assert_score_step(trace: DecisionTrace, name: str, type_: str, weight: float, expected: Mapping[str, float],
                      *, profile: str = "plugins") -> None:
    """The runner's step for scorer ``name`` and the term it put on each candidate (clamped, times the weight)."""
    s = step(trace, f"score/{name}")
    assert (s.kind, s.plugin, s.value, s.reason) == ("score", f"{name}/{type_}", weight,
                                                     f"weight {weight:g} ({profile})")
    at = [w[0] for w in weights(trace)].index(name)
    assert weights(trace)[at] == (name, weight, f"{name}/{type_}")
    got = {c.instance: c.score_terms[at] for c in trace.candidates if c.instance in expected}
    assert got == {iid: pytest.approx(x) for iid, x in expected.items()}


def tie_order(request_id: str, ids: list[str]) -> list[str]:
    """Equal totals in the documented tie order: ascending unsigned mmh3 of ``request_id:instance``."""
    return sorted(ids, key=lambda iid: mmh3.hash(f"{request_id}:{iid}", signed=False))
