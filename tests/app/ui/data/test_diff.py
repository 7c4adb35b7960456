"""Decision diff data: alignment by instance, term and fact differences, replay under a policy YAML."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.explain import CHAIN_ONLY, unjudged
from app.ui.data import diff
from router_core.rules.load import compile_policy
from router_core.rules.request import RequestView
from router_core.rules.route import RouteChoice
from schemas import ConfigError
from tests.app import stub_trace_api as stub
from tests.app.ui.data import audit_cases as cases_audit
from tests.app.ui.data import why_cases as cases
from tests.router_core.conftest import FLEET, decide, healthy
from tests.router_core.decide.test_router_rules import CONFIG as RULES_CONFIG
from tests.router_core.decide.test_router_rules import route

CHEAP_FIRST = {"fleet": {"instances": FLEET},
               "scoring": {"preset": "balanced", "weights": {"quality": 0, "latency": 0, "balance": 0, "cost": 1}}}


def test_a_trace_against_itself_differs_nowhere() -> None:
    t = stub.sample_trace()
    assert not diff.align(t, t)["differs"].any()
    assert not diff.terms_diff(t, t)["differs"].any()
    assert not diff.facts_diff(t, t)["differs"].any()


def test_alignment_by_instance_with_absent_sides() -> None:
    a, b = stub.sample_trace(), cases.normal_win()
    frame = diff.align(a, b)
    assert list(frame.columns) == list(diff.CANDIDATE_DIFF_COLUMNS)
    assert frame["instance"].tolist() == [stub.TOP_RANKED, stub.SELECTED_INSTANCE, stub.REJECTED_INSTANCE,
                                          "coder-6b-b", "coder-6b-a", "v4-32k-a"]
    row = frame.set_index("instance")
    assert row.loc[stub.TOP_RANKED, "verdict_b"] == "absent" and row.loc["coder-6b-b", "verdict_a"] == "absent"
    assert row.loc["v4-32k-a", "why_b"] == "removed by kv-cache 91% > 85% since 10:02:03"
    assert row.loc["coder-6b-b", "why_b"] == "" and row.loc["coder-6b-a", "why_b"].startswith("outscored by coder-6b-b")
    assert frame["differs"].all()


def test_changed_verdict_rank_and_terms_are_flagged() -> None:
    a = stub.sample_trace()
    flipped = [c.model_copy(update={"rank": {1: 2, 2: 1}[c.rank]}) if c.rank else c for c in a.candidates]
    terms = [c.model_copy(update={"score_terms": [0.9, 0.1, 0.8], "total": 0.54, "rank": 2})
             if c.instance == stub.TOP_RANKED else c for c in flipped]
    b = a.model_copy(update={"candidates": terms, "selected_instance": stub.TOP_RANKED})
    frame = diff.align(a, b).set_index("instance")
    assert frame.loc[stub.TOP_RANKED, "verdict_b"] == "selected" and frame.loc[stub.TOP_RANKED, "differs"]
    assert frame.loc[stub.TOP_RANKED, "delta"] == pytest.approx(0.54 - 0.742)
    assert not frame.loc[stub.REJECTED_INSTANCE, "differs"]
    t = diff.terms_diff(a, b)
    changed = t[t["differs"]]
    assert list(zip(changed["instance"], changed["term"], strict=True)) == [(stub.TOP_RANKED, "kv-cache")]
    facts = diff.facts_diff(a, b).set_index("field")
    assert facts.loc["selected", "differs"] and not facts.loc["rule", "differs"]


def test_replay_under_another_policy_yaml() -> None:
    _, trace = decide(healthy())
    again = diff.replay_yaml(trace, json.dumps(CHEAP_FIRST))
    assert again.selected_instance == "small-a" and again.request_id == trace.request_id
    frame = diff.align(trace, again).set_index("instance")
    assert frame.loc["small-a", "verdict_b"] == "selected"


def test_bad_policy_yaml_names_the_problem() -> None:
    _, trace = decide(healthy())
    with pytest.raises(ConfigError):
        diff.replay_yaml(trace, "fleet: [unclosed")
    with pytest.raises(ConfigError):
        diff.replay_yaml(trace, "router: {}\n")


RULES_FILE = "routing_matrix:\n  - {rule_name: to-small, condition: 'input_length > 0', primary_target: small}\n"


def config_with_policies(folder: Path) -> Path:
    """A ``routelens.yaml`` with the test fleet and, next to it, ``policies/`` with a routing policy and sections."""
    (folder / "policies").mkdir(parents=True)
    (folder / "policies" / "rules.yaml").write_text(RULES_FILE, encoding="utf-8")
    sections = {k: v for k, v in CHEAP_FIRST.items() if k != "fleet"}
    (folder / "policies" / "cheap.yaml").write_text(json.dumps(sections), encoding="utf-8")
    config = folder / "routelens.yaml"
    config.write_text(json.dumps({"fleet": {"instances": FLEET}}), encoding="utf-8")
    return config


def test_a_routing_policy_or_sections_replay_on_the_base_config_as_routelens_replay_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit's ``?policy=policies/seed000.yaml``: a routing policy is not a whole config ('fleet: Field
    required'); like ``routelens replay --policy`` it goes into the app's configuration, found next to it."""
    config = config_with_policies(tmp_path / "conf")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the app's working folder is not the configuration's
    _, trace = decide(healthy())
    rules = diff.policy_path("policies/rules.yaml", config)
    assert rules == tmp_path / "conf" / "policies" / "rules.yaml"
    assert diff.replay_file(trace, rules, config).request_id == trace.request_id
    cheap = diff.replay_file(trace, diff.policy_path("policies/cheap.yaml", config), config)
    assert cheap.selected_instance == "small-a"
    uploaded = diff.replay_yaml(trace, json.dumps({k: v for k, v in CHEAP_FIRST.items() if k != "fleet"}),
                                "cheap.yaml", config)
    assert uploaded.selected_instance == "small-a"
    with pytest.raises(ConfigError, match="base configuration"):
        diff.replay_file(trace, rules, None)
    with pytest.raises(ValueError, match="no policy file"):
        diff.policy_path("policies/none.yaml", config)
    assert diff.policy_path(str(rules), None) == rules  # an absolute path stays as it is


def test_an_uploaded_bad_policy_names_the_upload_not_a_temporary_file() -> None:
    _, trace = decide(healthy())
    with pytest.raises(ConfigError, match=r"^invalid configuration\nmine\.yaml:1: "):
        diff.replay_yaml(trace, "fleet: [unclosed", "mine.yaml")


def test_read_policy(tmp_path: Path) -> None:
    ok = tmp_path / "p.yaml"
    ok.write_text("fleet: {}\n", encoding="utf-8")
    assert diff.read_policy(str(ok)) == "fleet: {}\n"
    for bad, says in [(str(tmp_path / "x.txt"), "ends in"), (str(tmp_path / "none.yaml"), "no policy file"),
                      ("a\x00b.yaml", "not a usable"), ("y" * 5000, "not a usable")]:
        with pytest.raises(ValueError, match=says):
            diff.read_policy(bad)


def test_an_instance_a_rule_s_target_left_out_says_so_not_absent() -> None:
    only_small = compile_policy("routing_matrix:\n  - {rule_name: to-small, condition: 'input_length > 1000', "
                                "primary_target: small}\n", "p.yaml", RULES_CONFIG)
    view = RequestView(input_length=2000, query_length=2000, language="en", intent=None, intent_confidence=None,
                       file_types=(), has_attachments=False, request_time=datetime(2026, 11, 29, 15, tzinfo=UTC))
    _, a = decide(healthy(), RULES_CONFIG, route=RouteChoice(only_small, only_small.match(view), local_hour=15))
    _, b = decide(healthy(), RULES_CONFIG)
    assert [c.instance for c in a.candidates] == ["small-a"]  # the rule looked at its target's instances only
    row = diff.align(a, b).set_index("instance")
    assert row.loc["big-b", "verdict_a"] == "absent" and row.loc["big-b", "verdict_b"] == "selected"
    assert row.loc["big-a", "why_a"] == "left out by rule to-small's target small"
    assert row.loc["small-a", "why_a"] == "" and row.loc["big-b", "why_b"] == ""


def test_a_rule_s_chain_reads_as_not_filtered_or_scored_without_a_rank() -> None:
    """The audit: coder-6b-a/b read 'feasible', rank 3/4 where Why and ``routelens trace`` say the chain's."""
    _, a = decide(healthy(), RULES_CONFIG, route=route(tokens=2000))  # rule to-small; its chain's big-a, big-b
    _, b = decide(healthy(), RULES_CONFIG)
    assert sorted(unjudged(a)) == ["big-a", "big-b"] and all(c.rank for c in a.candidates)
    row = diff.align(a, b).set_index("instance")
    assert row.loc[["big-a", "big-b"], "verdict_a"].tolist() == [CHAIN_ONLY, CHAIN_ONLY]
    assert row.loc[["big-a", "big-b"], "rank_a"].isna().all()
    assert row.loc["small-a", "verdict_a"] == "selected" and row.loc["small-a", "rank_a"] == 1
    assert row.loc[b.selected_instance, "verdict_b"] == "selected" and row.loc[b.selected_instance, "rank_b"] == 1
    chain = cases_audit.rule_with_chain()
    same = diff.align(chain, chain).set_index("instance")
    assert same.loc[["coder-a", "coder-b"], "verdict_a"].tolist() == [CHAIN_ONLY, CHAIN_ONLY]
    assert same.loc[["coder-a", "coder-b"], "rank_b"].isna().all() and not same["differs"].any()
    assert same.loc["v4-b", "verdict_a"] == "feasible" and same.loc["v4-b", "rank_a"] == 2
