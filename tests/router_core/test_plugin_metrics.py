"""routelens_router_plugin_duration_seconds: the runner observes every plugin it calls, once per decision."""

from __future__ import annotations

import prometheus_client
from prometheus_client import CollectorRegistry

from router_core.decide.builtin import build_router
from tests.router_core.conftest import features, healthy, make_config
from tests.router_core.plugin_kit import route

COUNT = "routelens_router_plugin_duration_seconds_count"


def count(registry: CollectorRegistry, point: str, type_: str, name: str) -> float | None:
    return registry.get_sample_value(COUNT, {"extension_point": point, "plugin_type": type_, "plugin_name": name})


def test_every_plugin_is_observed_once_per_decision() -> None:
    registry = CollectorRegistry()
    router = build_router(make_config(), metrics=registry)
    state = healthy()
    for n in range(3):
        route(router, state, request_id=f"r{n}")  # the same snapshots: state-only verdicts come from the memo
    for point, type_, name in [
        ("filter", "freshness-filter", "freshness"), ("filter", "context-window-filter", "context-window"),
        ("filter", "constraint-filter", "kv-cache"), ("filter", "constraint-filter", "queue"),
        ("scorer", "kv-cache-scorer", "mem"), ("scorer", "queue-depth-scorer", "queue"),
        ("scorer", "warmup-scorer", "warmup"), ("scorer", "error-rate-scorer", "error"),
        ("picker", "max-score-picker", "max"),
    ]:
        assert count(registry, point, type_, name) == 3.0, (point, type_, name)


def test_an_unweighted_scorer_is_not_called_so_not_observed() -> None:
    registry = CollectorRegistry()
    route(build_router(make_config(), metrics=registry), healthy())
    assert not count(registry, "scorer", "quality-scorer", "quality")  # no series, or one with no observation
    assert count(registry, "scorer", "kv-cache-scorer", "mem") == 1.0


def test_named_plugins_are_their_own_series() -> None:
    registry = CollectorRegistry()
    cfg = make_config(router={"picker": "p2c", "plugins": [
        {"type": "zone-filter", "name": "eu-only", "parameters": {"zones": ["local"]}},
        {"type": "kv-cache-scorer", "name": "free-kv", "weight": 1.0},
        {"type": "p2c-picker", "name": "spread"}]})
    router = build_router(cfg, metrics=registry)
    route(router, healthy())
    route(router, healthy(), feats=features(tokens=50))
    assert count(registry, "filter", "zone-filter", "eu-only") == 2.0
    assert count(registry, "scorer", "kv-cache-scorer", "free-kv") == 2.0
    assert count(registry, "picker", "p2c-picker", "spread") == 2.0
    assert count(registry, "scorer", "kv-cache-scorer", "mem") is None


def test_without_metrics_nothing_is_registered() -> None:
    before = {m.name for m in prometheus_client.REGISTRY.collect()}
    route(build_router(make_config()), healthy())
    assert {m.name for m in prometheus_client.REGISTRY.collect()} == before
    assert prometheus_client.REGISTRY.get_sample_value(COUNT, {"extension_point": "picker",
                                                               "plugin_type": "max-score-picker",
                                                               "plugin_name": "max"}) is None
