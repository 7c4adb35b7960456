"""PluginRegistry: register, create, catalogue; the builtins; a test-only plugin used through build_router."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest

from router_core.decide.builtin import build_router, builtin_registry, register_builtin
from router_core.errors import DuplicatePluginType, PluginConfigError, UnknownPluginType
from router_core.framework import Candidate, Handle, PluginBase, PluginParams, PluginRegistry, RequestContext
from router_core.framework.plugin import ExtensionPoint
from schemas.config import PluginSpec
from schemas.errors import ConfigError
from schemas.trace import Violation
from tests.router_core.conftest import healthy
from tests.router_core.plugin_kit import assert_filter_step, plugins_config, route, step, weights

BUILTIN = {
    "freshness-filter": "filter", "context-window-filter": "filter", "zone-filter": "filter",
    "version-filter": "filter", "constraint-filter": "filter", "probe-filter": "filter", "attachment-filter": "filter",
    "breaker-filter": "filter",
    "kv-cache-scorer": "scorer", "queue-depth-scorer": "scorer", "warmup-scorer": "scorer",
    "error-rate-scorer": "scorer", "quality-scorer": "scorer", "latency-scorer": "scorer", "cost-scorer": "scorer",
    "balance-scorer": "scorer",
    "max-score-picker": "picker", "p2c-picker": "picker", "softmax-picker": "picker",
}


class ConstantScorer(PluginBase):
    """Test-only: the same raw value for every candidate, or a per-instance one."""

    TYPE: ClassVar[str] = "constant-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "constant"
    STATE_ONLY: ClassVar[bool] = False

    class Params(PluginParams):
        value: float = 0.5
        per_instance: dict[str, float] = {}

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        return [self.params.per_instance.get(c.spec.id, self.params.value) for c in pool]


class DenyFilter(PluginBase):
    """Test-only: rejects the listed instances and records what it was asked about."""

    TYPE: ClassVar[str] = "deny-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = "deny"
    STATE_ONLY: ClassVar[bool] = False

    class Params(PluginParams):
        ids: list[str]

    def __init__(self, name: str, params: Params, handle: Handle) -> None:
        super().__init__(name, params, handle)
        self.seen: list[str] = []

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        self.seen.append(candidate.spec.id)
        if candidate.spec.id not in self.params.ids:
            return None
        return Violation(constraint=self.name, metric="id", op="not in", value=None, threshold=0.0, reason="denied")


def fake_registry() -> PluginRegistry:
    registry = builtin_registry()
    registry.register(ConstantScorer.TYPE, ConstantScorer)
    registry.register(DenyFilter.TYPE, DenyFilter)
    return registry


def test_register_create_and_catalogue_in_a_fresh_registry() -> None:
    registry = PluginRegistry()
    assert registry.catalogue() == []
    registry.register(DenyFilter.TYPE, DenyFilter)
    registry.register(ConstantScorer.TYPE, ConstantScorer)
    assert registry.catalogue() == [{"type": "deny-filter", "extension_point": "filter"},
                                    {"type": "constant-scorer", "extension_point": "scorer"}]
    assert registry.extension_point("constant-scorer") == "scorer"
    plugin = registry.create(PluginSpec(type="constant-scorer", name="flat", parameters={"value": 0.25}), Handle())
    assert isinstance(plugin, ConstantScorer) and plugin.name == "flat" and plugin.params.value == 0.25
    unnamed = registry.create(PluginSpec(type="constant-scorer"), Handle())
    assert unnamed.name == "constant" and unnamed.params.value == 0.5


def test_the_handle_reaches_the_plugin() -> None:
    handle = Handle()
    assert fake_registry().create(PluginSpec(type="constant-scorer"), handle).handle is handle


def test_a_type_registered_twice() -> None:
    registry = PluginRegistry()
    registry.register("constant-scorer", ConstantScorer)
    with pytest.raises(DuplicatePluginType, match="'constant-scorer' is registered twice"):
        registry.register("constant-scorer", ConstantScorer)
    with pytest.raises(DuplicatePluginType, match="'freshness-filter'"):
        register_builtin(builtin_registry())
    assert not isinstance(DuplicatePluginType("x"), ConfigError)  # a programming error, not the user's config


def test_an_unknown_type_lists_the_known_ones() -> None:
    registry = PluginRegistry()
    registry.register(DenyFilter.TYPE, DenyFilter)
    registry.register(ConstantScorer.TYPE, ConstantScorer)
    with pytest.raises(UnknownPluginType) as info:
        registry.create(PluginSpec(type="nope", name="x"), Handle(), loc=("router", "plugins", 3))
    err = info.value
    assert isinstance(err, ConfigError) and err.typed_name == "x/nope"
    assert err.located == [(("router", "plugins", 3, "type"),
                            "unknown plugin type 'nope'; known: constant-scorer, deny-filter")]
    assert "router.plugins[3].type (x/nope)" in str(err)


def test_the_builtin_unknown_type_message_names_every_builtin() -> None:
    with pytest.raises(UnknownPluginType) as info:
        builtin_registry().create(PluginSpec(type="nope"), Handle())
    ((_, message),) = info.value.located
    assert message == "unknown plugin type 'nope'; known: " + ", ".join(sorted(BUILTIN))


def test_the_catalogue_has_every_builtin_at_its_extension_point() -> None:
    catalogue = builtin_registry().catalogue()
    assert len(catalogue) == len(BUILTIN)
    assert {e["type"]: e["extension_point"] for e in catalogue} == BUILTIN


def test_builtin_registries_are_independent() -> None:
    mine = fake_registry()
    assert len(mine.catalogue()) == len(BUILTIN) + 2
    assert len(builtin_registry().catalogue()) == len(BUILTIN)  # no global side effect


def test_a_bad_parameter_of_a_fake_plugin() -> None:
    with pytest.raises(PluginConfigError) as info:
        fake_registry().create(PluginSpec(type="deny-filter", name="d", parameters={"ids": "a"}), Handle(),
                               loc=("router", "plugins", 0))
    assert info.value.typed_name == "d/deny-filter"
    assert [loc for loc, _ in info.value.located] == [("router", "plugins", 0, "parameters", "ids")]


CFG = plugins_config([{"type": "deny-filter", "name": "blocklist", "parameters": {"ids": ["big-b"]}},
                      {"type": "constant-scorer", "name": "flat", "weight": 2.0,
                       "parameters": {"value": 0.25, "per_instance": {"small-a": 1.7}}}])


def test_a_fake_plugin_runs_inside_the_router() -> None:
    router = build_router(CFG, registry=fake_registry())
    ranked, trace = route(router, healthy())
    assert ranked == ["small-a", "big-a"]
    (deny,) = router.policy.filters
    assert deny.seen == ["big-a", "big-b", "small-a"]
    assert_filter_step(trace, "blocklist", "deny-filter", kept=2, rejected=["big-b"])
    assert weights(trace) == [("flat", 2.0, "flat/constant-scorer")]
    assert step(trace, "score/flat").plugin == "flat/constant-scorer"
    # the runner clamps the fake's 1.7 to 1
    assert {c.instance: (c.score_terms, c.total) for c in trace.candidates if c.total is not None} == {
        "big-a": ([0.25], 0.5), "small-a": ([1.0], 2.0)}


def test_without_the_registry_the_fake_type_is_unknown() -> None:
    with pytest.raises(UnknownPluginType) as info:
        build_router(CFG)
    assert info.value.typed_name == "blocklist/deny-filter"
    assert [loc for loc, _ in info.value.located] == [("router", "plugins", 0, "type")]
