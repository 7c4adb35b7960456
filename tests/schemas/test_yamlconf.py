"""YAML loading shared by configs and policies: a key given twice is refused, merge keys still work."""

import pytest
import yaml

from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.yamlconf import DuplicateKeyError, UniqueKeyLoader, parse_yaml_model

FLEET = """\
fleet:
  instances:
    - &one {id: a, model: m1, url: "http://127.0.0.1:9001"}
"""
LAST = "(YAML would silently keep only the last)"


def test_a_top_level_key_given_twice_is_refused() -> None:
    text = FLEET + "gateway: {port: 1}\nprobes: {interval_s: 5}\ngateway: {port: 2}\n"
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, text, "c.yaml")
    assert info.value.problems == [(6, "gateway", f"duplicate key at column 1, first at line 4 {LAST}")]
    assert f"c.yaml:6: gateway: duplicate key at column 1, first at line 4 {LAST}" in str(info.value)


def test_a_nested_key_given_twice_is_refused_with_its_field() -> None:
    text = FLEET + "    - {id: b, model: m1, url: 'http://127.0.0.1:9002', model: m2}\ngateway:\n  port: 1\n  port: 2\n"
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, text, "c.yaml")
    assert [(line, field) for line, field, _ in info.value.problems] == [(4, "fleet.instances[1].model"),
                                                                          (7, "gateway.port")]
    assert f"c.yaml:4: fleet.instances[1].model: duplicate key at column 56, first at line 4 {LAST}" in str(info.value)


def test_a_key_that_overrides_a_merged_one_is_not_a_duplicate() -> None:
    text = FLEET + "    - {<<: *one, id: b, url: 'http://127.0.0.1:9002'}\n"
    cfg = parse_yaml_model(RouteLensConfig, text, "c.yaml")
    assert [(s.id, s.model, s.url) for s in cfg.fleet.instances] == [
        ("a", "m1", "http://127.0.0.1:9001"), ("b", "m1", "http://127.0.0.1:9002")]


def test_the_loader_error_marks_both_keys() -> None:
    with pytest.raises(DuplicateKeyError) as info:
        yaml.load("a: 1\nb: 2\n'a': 3\n", Loader=UniqueKeyLoader)
    assert info.value.problem_mark is not None and info.value.context_mark is not None
    assert (info.value.problem_mark.line, info.value.context_mark.line) == (2, 0)
    assert [(d.path, d.line, d.col, d.first_line) for d in info.value.duplicates] == [(("a",), 3, 1, 1)]


def test_a_value_no_member_of_a_union_takes_is_one_problem() -> None:
    text = ('fleet: {instances: [{id: a, model: m, url: "http://127.0.0.1:9"}]}\n'
            "routing: {intents: {routes: r.yaml, fast_threshold: high}}\n")  # "calibrated" or a number
    with pytest.raises(ConfigError) as exc:
        parse_yaml_model(RouteLensConfig, text, "c.yaml")
    lines = [line for line in str(exc.value).splitlines() if "fast_threshold" in line]
    assert len(lines) == 1 and "'calibrated'; or input should be a valid number" in lines[0], str(exc.value)


def test_an_inline_policy_names_the_field_as_written_on_its_own_line() -> None:
    """A written-out shadow or arm policy is a tagged union member: its tag (``inline``) is pydantic's, not a key.

    The error read ``experiments.shadow.policy.inline.router.analyse_max_chars`` on the policy's first
    key's line (``scoring:``); the field is one line further down, and no ``inline`` was written.
    """
    text = FLEET + ("experiments:\n  shadow:\n    router_version: rc\n    policy:\n      scoring: {preset: balanced}\n"
                    "      router: {analyse_max_chars: -5}\n  arms:\n    - {name: a, router_version: v1, share: 0.5}\n"
                    "    - name: b\n      router_version: v2\n      share: 0.5\n      policy:\n"
                    "        scoring: {preset: balanced}\n        router: {picker: nonsense}\n")
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, text, "c.yaml")
    assert [(line, field) for line, field, _ in info.value.problems] == [
        (17, "experiments.arms[1].policy.router.picker"), (9, "experiments.shadow.policy.router.analyse_max_chars")]


def test_a_missing_required_field_still_names_the_field_to_add() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, "fleet:\n  instances:\n    - {model: m1, url: 'http://127.0.0.1:9001'}\n",
                         "c.yaml")
    assert [(line, field) for line, field, _ in info.value.problems] == [(3, "fleet.instances[0].id")]
