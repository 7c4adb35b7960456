"""A misroute becomes a regression case: appended as text to a copy of a shipped file, compiled, run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.config import load_config
from app.regression import append_intent_example, append_policy_case, case_from_trace, check_case, write
from router_core.errors import PolicyError
from schemas.trace import RequestFeatures
from tests.factories import make_trace

ROOT = Path(__file__).resolve().parents[2]
CONFIG = load_config(ROOT / "routelens.yaml")
POLICY = ROOT / "policies" / "seed000.yaml"
SHIPPED = len(yaml.safe_load(POLICY.read_text(encoding="utf-8"))["tests"])  # the shipped file's own cases


def _trace(tokens: int) -> object:
    feats = RequestFeatures(requested_model="auto", n_messages=1, input_chars=tokens * 4, est_input_tokens=tokens)
    return make_trace("req_misrouted_1", features=feats)


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    return Path(shutil.copy(POLICY, tmp_path / "seed000.yaml"))


def test_a_misroute_case_lands_in_the_tests_and_the_rest_of_the_file_is_untouched(policy: Path) -> None:
    case = case_from_trace(_trace(9000), name="long input misrouted", rule="long_context_priority",
                           target="deepseek-v4-32k")
    change = append_policy_case(policy, case, CONFIG)
    assert policy.read_text(encoding="utf-8") == change.before  # nothing written yet: a proposal
    added = [line[1:] for line in change.diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    removed = [line for line in change.diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == [] and len(added) == 3 and added[0] == "  - name: long input misrouted"
    assert "input_length: 9000" in added[1] and "request_time: '2026-11-01T09:30:00Z'" in added[1]
    assert added[2] == "    expect: {rule: long_context_priority, target: deepseek-v4-32k}"
    assert check_case(change, case.name, CONFIG).passed
    write(change)
    doc = yaml.safe_load(policy.read_text(encoding="utf-8"))
    assert doc["tests"][-1]["name"] == "long input misrouted" and len(doc["tests"]) == SHIPPED + 1
    assert policy.read_text(encoding="utf-8").startswith(POLICY.read_text(encoding="utf-8").split("tests:")[0])


def test_policy_test_runs_the_new_case_and_fails_while_the_policy_still_misroutes(policy: Path) -> None:
    # 40 tokens, no legal term: the policy matches no rule, the operator says it should have been the 32k rule
    case = case_from_trace(_trace(40), name="short legal question", rule="long_context_priority",
                           target="deepseek-v4-32k")
    change = append_policy_case(policy, case, CONFIG)
    result = check_case(change, case.name, CONFIG)
    assert not result.passed and result.rule is None
    write(change)
    run = subprocess.run([sys.executable, "-m", "app", "--config", str(ROOT / "routelens.yaml"), "policy", "test",
                          str(policy)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAIL short legal question: rule -, target - (expected rule long_context_priority" in run.stdout
    assert f"{SHIPPED} of {SHIPPED + 1} cases pass" in run.stdout


def test_the_typed_query_makes_a_prompt_rule_reproducible(policy: Path) -> None:
    case = case_from_trace(_trace(40), name="legal terms", rule="long_context_priority", target="deepseek-v4-32k",
                           prompt="请解释合同第3条的违约条款")
    assert check_case(append_policy_case(policy, case, CONFIG), "legal terms", CONFIG).passed


def test_a_file_without_tests_or_with_an_empty_list_gets_a_block(tmp_path: Path) -> None:
    rules = "routing_matrix:\n  - {rule_name: big, condition: 'input_length > 100', primary_target: deepseek-v4-32k}\n"
    case = case_from_trace(_trace(200), name="big one", rule="big", target="deepseek-v4-32k")
    old = "tests:\n  # the cases\n  - {name: old, expect: {rule: null}}\n\n# trailing words\n"
    for i, (tail, names) in enumerate((("", ["big one"]), ("tests: []  # none yet\n", ["big one"]),
                                       (old, ["old", "big one"]))):
        path = tmp_path / f"p{i}.yaml"
        path.write_text(rules + tail, encoding="utf-8")
        change = append_policy_case(path, case, CONFIG)
        assert [c["name"] for c in yaml.safe_load(change.after)["tests"]] == names
        assert check_case(change, "big one", CONFIG).passed


def test_a_flow_style_tests_list_is_refused_not_duplicated(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("routing_matrix:\n  - {rule_name: big, condition: 'input_length > 100', primary_target: "
                    "deepseek-v4-32k}\ntests: [{name: old, expect: {rule: null}}]\n", encoding="utf-8")
    case = case_from_trace(_trace(200), name="big one", rule="big", target="deepseek-v4-32k")
    with pytest.raises((ValueError, PolicyError)):
        append_policy_case(path, case, CONFIG)


def test_a_case_naming_a_rule_the_policy_lacks_fails(policy: Path) -> None:
    case = case_from_trace(_trace(40), name="x", rule="no_such_rule", target="deepseek-v4-32k")
    change = append_policy_case(policy, case, CONFIG)
    assert not check_case(change, "x", CONFIG).passed


def test_write_refuses_a_file_changed_since(policy: Path) -> None:
    change = append_policy_case(policy, case_from_trace(_trace(9000), name="n", rule=None, target=None), CONFIG)
    policy.write_text(policy.read_text(encoding="utf-8") + "# edited meanwhile\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="changed since"):
        write(change)
    assert policy.read_text(encoding="utf-8").endswith("# edited meanwhile\n")


def test_an_intent_example_joins_its_route_and_nothing_else_moves(tmp_path: Path) -> None:
    routes = tmp_path / "routes.yaml"
    shutil.copy(ROOT / "data" / "intents" / "routelens_routes.yaml", routes)
    before = yaml.safe_load(routes.read_text(encoding="utf-8"))
    change = append_intent_example(routes, "ticket", "my card was charged twice: which queue?")
    write(change)
    after = yaml.safe_load(routes.read_text(encoding="utf-8"))
    assert after["ticket"] == [*before["ticket"], "my card was charged twice: which queue?"]
    assert {k: v for k, v in after.items() if k != "ticket"} == {k: v for k, v in before.items() if k != "ticket"}
    assert routes.read_text(encoding="utf-8").startswith("# RouteLens's own traffic classes")
    with pytest.raises(ValueError, match="has no route 'weather'; a new route needs at least two examples"):
        append_intent_example(routes, "weather", "will it rain")  # one example: a route the classifier refuses


def test_a_flow_style_route_is_refused(tmp_path: Path) -> None:
    routes = tmp_path / "routes.yaml"
    routes.write_text("ticket: [a, b]\nmath: [c]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="did not land"):
        append_intent_example(routes, "ticket", "d")
