"""Bad ``experiments:`` sections: a clear ConfigError naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from router_core.experiments import build_experiment
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.yamlconf import parse_yaml_model

FLEET = "fleet:\n  instances:\n    - {id: a, model: m, url: 'http://127.0.0.1:1'}\n"


def parse(experiments: str) -> RouteLensConfig:
    return parse_yaml_model(RouteLensConfig, FLEET + experiments, "routelens.yaml")


def test_shares_that_do_not_sum_to_one_name_the_line_and_field() -> None:
    with pytest.raises(ConfigError) as info:
        parse("experiments:\n  arms:\n    - {name: a, router_version: v1, share: 0.5}\n"
              "    - {name: b, router_version: v2, share: 0.4}\n")
    (line, field, msg), = info.value.problems
    assert (line, field) == (6, "experiments.arms") and "sum to 1" in msg and "0.9" in msg
    assert "routelens.yaml:6: experiments.arms" in str(info.value)


def test_shares_within_the_tolerance_load() -> None:
    cfg = parse("experiments:\n  arms:\n    - {name: a, router_version: v1, share: 0.1}\n"
                "    - {name: b, router_version: v2, share: 0.2}\n    - {name: c, router_version: v3, share: 0.7}\n")
    assert cfg.experiments is not None and cfg.experiments.arm_names == ["a", "b", "c"]


@pytest.mark.parametrize(("section", "field", "needle"), [
    ("experiments:\n  arms:\n    - {name: a, router_version: v1, share: 0.5}\n"
     "    - {name: a, router_version: v2, share: 0.5}\n", "experiments.arms", "unique"),
    ("experiments:\n  key: cookie\n  arms:\n    - {name: a, router_version: v1, share: 1}\n", "experiments.key",
     "pattern"),
    ("experiments:\n  arms:\n    - {name: a, router_version: v1, share: 1}\n  shadow: {arm: zz}\n", "experiments",
     "shadow.arm 'zz' is not an arm"),
    ("experiments:\n  arms:\n    - {name: a, router_version: v1, share: 1, policy: {scoring: {preset: nope}}}\n",
     "experiments.arms[0].policy", "seed-instance-score"),
    ("experiments:\n  arms: []\n", "experiments.arms", "at least 1"),
], ids=["duplicate-arm", "bad-key", "unknown-shadow-arm", "bad-inline-policy", "no-arms"])
def test_bad_sections(section: str, field: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(section)
    assert any(f.startswith(field) and needle in m and line is not None for line, f, m in info.value.problems), \
        info.value.problems


def test_a_policy_file_that_does_not_exist(tmp_path: Path) -> None:
    cfg = parse(f"experiments:\n  arms:\n    - {{name: a, router_version: v1, share: 1, "
                f"policy: '{tmp_path / 'missing.yaml'}'}}\n")
    with pytest.raises(ConfigError) as info:
        build_experiment(cfg)
    assert "missing.yaml" in str(info.value) and "experiments.arms[0].policy" in str(info.value)
    assert "cannot read" in str(info.value)


def test_a_policy_file_that_does_not_validate_names_its_own_line(tmp_path: Path) -> None:
    policy = tmp_path / "v2.yaml"
    policy.write_text("# candidate\nscoring:\n  preset: balanced\n  weights: {speed: 1}\n")
    cfg = parse(f"experiments:\n  arms:\n    - {{name: a, router_version: v1, share: 1, policy: '{policy}'}}\n")
    with pytest.raises(ConfigError) as info:
        build_experiment(cfg)
    (line, field, msg), = info.value.problems
    assert info.value.source == str(policy) and line == 4 and field == "scoring.weights" and "speed" in msg


def test_a_policy_file_with_a_bad_plugin_names_its_file_and_line(tmp_path: Path) -> None:
    policy = tmp_path / "v2.yaml"
    policy.write_text("router:\n  plugins:\n    - {type: no-such-plugin}\n")
    cfg = parse(f"experiments:\n  arms:\n    - {{name: a, router_version: v1, share: 1, policy: '{policy}'}}\n")
    with pytest.raises(ConfigError) as info:
        build_experiment(cfg)
    assert info.value.source == str(policy) and info.value.problems[0][0] == 3


def test_a_whole_routelens_yaml_is_a_policy_file_and_relative_paths_start_at_base_dir(tmp_path: Path) -> None:
    root = Path(__file__).parents[3]
    whole = yaml.safe_load(root.joinpath("routelens.yaml").read_text())
    whole["scoring"] = {"preset": "seed-instance-score"}
    # its routing section is read too (the arm's own rules): the files it names, where they are
    whole["routing"]["policy"] = str(root / whole["routing"]["policy"])
    whole["routing"]["intents"]["routes"] = str(root / whole["routing"]["intents"]["routes"])
    (tmp_path / "v2.yaml").write_text(yaml.safe_dump(whole))
    cfg = parse("experiments:\n  arms:\n    - {name: a, router_version: v1, share: 0.5}\n"
                "    - {name: b, router_version: v2, share: 0.5, policy: v2.yaml}\n")
    exp = build_experiment(cfg, base_dir=tmp_path)
    assert exp is not None
    a, b = exp.arms.by_name["a"], exp.arms.by_name["b"]
    assert b.router.policy.weights_name == "seed-instance-score" and a.policy_hash != b.policy_hash
    assert [s.id for s in b.router.policy.fleet] == ["a"]  # the fleet stays the serving config's
    config_b = b.router.policy.config
    assert config_b is not None and config_b.routing.policy == whole["routing"]["policy"]


def test_the_shipped_config_declares_two_arms_and_a_shadow() -> None:
    text = Path(__file__).parents[3].joinpath("routelens.yaml").read_text()
    cfg = parse_yaml_model(RouteLensConfig, text, "routelens.yaml")
    exp = build_experiment(cfg)
    assert exp is not None and len(exp.arms.by_name) == 2 and exp.shadow is not None
    hashes = {a.policy_hash for a in exp.arms} | {exp.shadow.policy_hash}
    assert len(hashes) == 3
