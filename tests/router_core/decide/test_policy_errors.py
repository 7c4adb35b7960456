"""build_policy refuses an inconsistent router.plugins, naming the plugin's name/type and where it sits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from router_core.decide.builtin import build_router
from router_core.errors import PluginConfigError, PluginError, ProfileError, UnknownPluginType
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from tests.router_core.conftest import make_config

ZONE = {"type": "zone-filter", "parameters": {"zones": ["local"]}}
MEM = {"type": "kv-cache-scorer", "weight": 1.0}


@dataclass(frozen=True)
class Case:
    id: str
    plugins: list[dict[str, Any]]
    error: type[PluginError]
    typed_name: str
    loc: tuple[int | str, ...]
    message: str


CASES = [
    Case("scorer-without-weight", [ZONE, {"type": "kv-cache-scorer"}], ProfileError, "mem/kv-cache-scorer",
         ("router", "plugins", 1, "weight"), "the scorer mem/kv-cache-scorer needs a weight"),
    Case("weight-on-a-filter", [ZONE | {"weight": 1.0}, MEM], ProfileError, "zone/zone-filter",
         ("router", "plugins", 0, "weight"), "zone/zone-filter is a filter: only scorers take a weight"),
    Case("weight-on-a-picker", [MEM, {"type": "p2c-picker", "weight": 0.5}], ProfileError, "p2c/p2c-picker",
         ("router", "plugins", 1, "weight"), "p2c/p2c-picker is a picker: only scorers take a weight"),
    Case("second-picker", [MEM, {"type": "max-score-picker"}, {"type": "softmax-picker", "name": "soft"}],
         ProfileError, "soft/softmax-picker", ("router", "plugins", 2),
         "a second picker (soft/softmax-picker); a profile has exactly one"),
    Case("duplicate-filter-name", [ZONE, MEM, ZONE | {"parameters": {"zones": ["eu"]}}], ProfileError,
         "zone/zone-filter", ("router", "plugins", 2, "name"), "a second filter named 'zone'"),
    Case("duplicate-filter-name-across-types", [ZONE | {"name": "gate"}, {"type": "freshness-filter", "name": "gate"}],
         ProfileError, "gate/freshness-filter", ("router", "plugins", 1, "name"), "a second filter named 'gate'"),
    Case("duplicate-scorer-name", [MEM, {"type": "queue-depth-scorer", "name": "mem", "weight": 1.0}], ProfileError,
         "mem/queue-depth-scorer", ("router", "plugins", 1, "name"), "a second scorer named 'mem'"),
    Case("constraint-filter-without-a-name", [{"type": "constraint-filter", "parameters": {"metric": "queue",
                                                                                          "threshold": 4}}],
         PluginConfigError, "<unnamed>/constraint-filter", ("router", "plugins", 0, "name"),
         "a constraint-filter needs a name"),
    Case("bad-parameter", [MEM, {"type": "queue-depth-scorer", "weight": 1.0, "parameters": {"queue_norm": 0}}],
         PluginConfigError, "queue/queue-depth-scorer", ("router", "plugins", 1, "parameters", "queue_norm"),
         "Input should be greater than 0"),
    Case("unknown-type", [MEM, {"type": "gpu-scorer", "name": "gpu", "weight": 1.0}], UnknownPluginType,
         "gpu/gpu-scorer", ("router", "plugins", 1, "type"), "unknown plugin type 'gpu-scorer'; known: "),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_build_refuses(case: Case) -> None:
    with pytest.raises(PluginError) as info:
        build_router(make_config(router={"plugins": case.plugins}))
    err = info.value
    assert type(err) is case.error and isinstance(err, ConfigError)
    assert err.typed_name == case.typed_name
    ((loc, message),) = err.located
    assert loc == case.loc and message.startswith(case.message)


@pytest.mark.parametrize("plugins", [
    [{"type": "constraint-filter", "name": "queue", "parameters": {"metric": "queue", "threshold": 4}},
     {"type": "queue-depth-scorer", "weight": 1.0}],  # one name at two extension points (the default config does it)
    [MEM | {"weight": 0.0}],  # a zero weight is a weight
    [],  # an empty pipeline: every candidate, unscored, max-score picked
], ids=["same-name-filter-and-scorer", "zero-weight", "empty"])
def test_build_accepts(plugins: list[dict[str, Any]]) -> None:
    assert build_router(make_config(router={"plugins": plugins})).policy.picker.TYPE == "max-score-picker"


def test_sections_may_leave_scorers_unweighted() -> None:
    policy = build_router(make_config()).policy
    assert set(policy.scorers) == {"mem", "queue", "warmup", "error", "quality", "latency", "cost", "balance"}
    assert policy.base_weights == {"mem": 0.4, "queue": 0.3, "warmup": 0.2, "error": 0.1}


YAML = """\
fleet:
  instances:
    - {id: a, model: m, url: "http://127.0.0.1:1"}
router:
  plugins:
    - type: kv-cache-scorer
      weight: 1
    - type: zone-filter
      weight: 2
      parameters: {zones: [eu]}
"""


def test_the_error_names_the_yaml_line() -> None:
    with pytest.raises(ProfileError) as info:
        build_router(RouteLensConfig.model_validate(yaml.safe_load(YAML)))
    located = info.value.at("routelens.yaml", YAML)
    assert type(located) is ProfileError and located.typed_name == "zone/zone-filter"
    assert located.problems == [(9, "router.plugins[1].weight (zone/zone-filter)",
                                 "zone/zone-filter is a filter: only scorers take a weight")]
    assert "routelens.yaml:9: router.plugins[1].weight (zone/zone-filter)" in str(located)
