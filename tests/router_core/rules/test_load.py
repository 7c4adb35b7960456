"""Policy files: the seed matrix and DSL as written load and route as meant; every bad file is located."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from router_core.errors import PolicyError
from router_core.rules.cases import run_cases
from router_core.rules.ir import CostParams, ResourceGuarantee, Throttle, TimeoutPolicy
from router_core.rules.load import compile_policy, load_policy
from schemas.config import RouteLensConfig

ROOT = Path(__file__).resolve().parents[3]

# Seed 000, "生产环境配置演进（2026Q2）", character for character.
SEED_000 = '''routing_matrix:
  - rule_name: "long_context_priority"
    condition: "input_length > 8000 || contains_legal_terms(prompt)"
    primary_target: "deepseek-v4-32k"
    fallback_chain: ["deepseek-coder-6b-fp16", "legacy-rule-engine"]
    cost_params:
      base_weight: 1.5
      surge_multiplier: 2.0
    throttle_config:
      max_rps: 50
      burst_window: 10s

  - rule_name: "urgent_ticket"
    condition: "prompt_contains('紧急') && request_time.hour in [9,11,14,16]"
    priority: "high"
    resource_guarantee:
      min_gpu_mem: 12GB
      reserved_cores: 4
    timeout_policy:
      initial_timeout: 1500ms
      retry_backoff: 200ms
'''
SEED_003 = '''  IF intent == "legal" AND file_type == "pdf" 
    THEN route_to("qwen-vl") 
    WITH timeout=8000ms, fallback="llama3-8b"
  ELSE IF query_length > 1024 
    THEN route_to("llama3-8b") 
    WITH compression="flash-attn"
'''  # noqa: W291  (the seed's trailing spaces)
DEGRADED = "degraded_targets:\n  legacy-rule-engine: {canned: rules}\n"


def seed_config() -> RouteLensConfig:
    return RouteLensConfig.model_validate(yaml.safe_load((ROOT / "routelens.yaml").read_text(encoding="utf-8")))


def config(*instances: dict[str, Any]) -> RouteLensConfig:
    return RouteLensConfig.model_validate({"fleet": {"instances": [
        {"url": f"http://127.0.0.1:{9000 + i}", **spec} for i, spec in enumerate(instances)]}})


FIN = config({"id": "vl-1", "model": "qwen-vl"},
             {"id": "llama-1", "model": "llama3-8b", "features": ["flash-attn"]})


def test_the_shipped_policies_hold_the_seeds_as_written() -> None:
    assert SEED_000 in (ROOT / "policies" / "seed000.yaml").read_text(encoding="utf-8")
    dsl = yaml.safe_load((ROOT / "policies" / "seed003.yaml").read_text(encoding="utf-8"))["routing_dsl"]
    assert [line.strip() for line in dsl.splitlines()] == [line.strip() for line in SEED_003.splitlines()]


def test_the_seed_matrix_loads_with_every_field_acted_on() -> None:
    rules = compile_policy(SEED_000 + DEGRADED, "m.yaml", seed_config())
    long, urgent = rules.rules
    assert (long.name, long.primary, long.chain) == (
        "long_context_priority", "deepseek-v4-32k", ("deepseek-coder-6b-fp16", "legacy-rule-engine"))
    assert long.cost == CostParams(1.5, 2.0)
    assert long.throttle == Throttle(rate=50, burst=500, overflow="chain", max_wait_s=1.0)
    assert (urgent.primary, urgent.priority) == (None, 2)
    assert urgent.guarantee == ResourceGuarantee(min_free_kv_bytes=12 * 2**30, min_free_slots=4)
    assert urgent.timeout == TimeoutPolicy(1.5, 0.2)
    assert set(rules.degraded) == {"legacy-rule-engine"}


def test_the_shipped_policy_files_pass_their_own_cases() -> None:
    for path, cfg in ((ROOT / "policies" / "seed000.yaml", seed_config()), (ROOT / "policies" / "seed003.yaml", FIN)):
        results = run_cases(load_policy(path, cfg))
        assert results and all(r.passed for r in results), [(r.case.name, r.rule) for r in results if not r.passed]


def test_a_failing_case_is_reported_as_failing() -> None:
    case = "  - {name: wrong, request: {input_length: 9000}, expect: {rule: urgent_ticket}}\n"
    text = SEED_000 + DEGRADED + "tests:\n" + case
    (result,) = run_cases(compile_policy(text, "m.yaml", seed_config()))
    assert not result.passed and result.rule == "long_context_priority"


def test_a_bare_dsl_file_compiles_against_the_fleet() -> None:
    rules = compile_policy(SEED_003, "p.dsl", FIN)
    assert [r.name for r in rules.rules] == ["clause-1", "clause-2"]


BAD = [
    ("yaml-syntax", "routing_matrix: [\n", "m.yaml:2:1: YAML syntax error"),
    ("unknown-field", "routing_matrix:\n  - rule_name: a\n    reserved_gpus: 2\n",
     "m.yaml:3:5: routing_matrix[0].reserved_gpus: the router cannot act on this field"),
    ("bad-duration", "routing_matrix:\n  - rule_name: a\n    timeout_policy: {initial_timeout: soon}\n",
     "m.yaml:3:39: routing_matrix[0].timeout_policy.initial_timeout"),
    ("condition-syntax", 'routing_matrix:\n  - rule_name: a\n    condition: "input_length >"\n', "m.yaml:3:"),
    ("unknown-feature", 'routing_matrix:\n  - rule_name: a\n    condition: "colour == 3"\n', "m.yaml:3:17:"),
    ("unknown-function", "routing_matrix:\n  - rule_name: a\n    condition: \"contains_gossip(prompt)\"\n",
     "m.yaml:3:17:"),
    ("unknown-target", "routing_matrix:\n  - rule_name: a\n    primary_target: gpt-9\n",
     "m.yaml:3:21: rule a: primary target 'gpt-9' is not a model any instance serves"),
    ("unknown-chain-target", "routing_matrix:\n  - rule_name: a\n    primary_target: qwen-vl\n"
     "    fallback_chain: [llama3-8b, nowhere]\n", "m.yaml:4:33: rule a: fallback target 'nowhere' does not exist"),
    ("chain-back-to-primary", "routing_matrix:\n  - rule_name: a\n    primary_target: qwen-vl\n"
     "    fallback_chain: [llama3-8b, qwen-vl]\n", "m.yaml:4:33: rule a: the chain comes back to 'qwen-vl' (a cycle)"),
    ("model-fallbacks-loop", "routing_matrix:\n  - rule_name: a\nmodel_fallbacks:\n  qwen-vl: [llama3-8b]\n"
     "  llama3-8b: [qwen-vl]\n", "fallback chains loop: qwen-vl -> llama3-8b -> qwen-vl"),
    ("guarantee-without-kv-bytes", "routing_matrix:\n  - rule_name: a\n    resource_guarantee: {min_gpu_mem: 12GB}\n",
     "m.yaml:3:39: rule a: min_gpu_mem needs kv_cache_bytes on instances vl-1, llama-1"),
    ("dsl-unknown-target", 'routing_dsl: |\n  IF input_length > 3\n    THEN route_to("gpt-9")\n',
     "m.yaml:3:19: rule clause-1: primary target 'gpt-9'"),  # at the literal, not at the IF
    ("dsl-missing-feature", 'routing_dsl: |\n  IF input_length > 3 THEN route_to("qwen-vl") WITH compression="x"\n',
     "no instance of qwen-vl declares feature 'x'"),
    ("duplicate-rule", "routing_matrix:\n  - rule_name: a\n  - rule_name: a\n", "rule_name used twice: a"),
    ("no-rules", "tests: []\n", "a policy file needs routing_matrix or routing_dsl"),
    # A value no member of a union takes: one line, the members' messages joined, no pydantic tags in the field.
    ("union-value", "routing_matrix:\n  - rule_name: a\n    priority: urgent\n",
     "m.yaml:3:15: routing_matrix[0].priority: Input should be 'low', 'normal' or 'high'; or input should be a "
     "valid integer"),
    ("megabyte-condition", "routing_matrix:\n  - rule_name: a\n    condition: \"" + "input_length > 1 && " * 55_000
     + "true\"\n", "m.yaml:3:"),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD], ids=[i for i, _, _ in BAD])
def test_a_bad_policy_is_a_located_error(text: str, expected: str) -> None:
    with pytest.raises(PolicyError) as exc:
        compile_policy(text, "m.yaml", FIN)
    assert expected in str(exc.value), str(exc.value)
    assert all(line.startswith("m.yaml:") and line.split(":")[1].isdigit() and line.split(":")[2].isdigit()
               for line in str(exc.value).splitlines())
    assert len(exc.value.located) == len({(line, col, m.split(":")[0]) for line, col, m in exc.value.located})


def test_every_problem_of_a_file_is_reported_at_once() -> None:
    text = ("routing_matrix:\n  - rule_name: a\n    primary_target: gpt-9\n"
            "  - rule_name: b\n    primary_target: qwen-vl\n    fallback_chain: [nowhere]\n")
    with pytest.raises(PolicyError) as exc:
        compile_policy(text, "m.yaml", FIN)
    assert [(line, col) for line, col, _ in exc.value.located] == [(3, 21), (6, 22)]


def test_an_unreadable_or_huge_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "missing.yaml", FIN)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * 2_100_000, encoding="utf-8")
    with pytest.raises(PolicyError, match="larger than"):
        load_policy(big, FIN)


# Each case: the YAML, then (line, column, what the file holds there) per error. The compilers place a
# text as if copied verbatim from the file; these values are not (YAML strips, folds, unescapes).
YAML_POSITIONS = [
    ("literal-2nd-and-3rd-lines", "routing_matrix:\n  - rule_name: a\n    condition: |\n      input_length > 3\n"
     "        && foo > 1\n      && bar > 2\n", [(5, 12, "foo"), (6, 10, "bar")]),
    ("literal-ends-too-early", "routing_matrix:\n  - rule_name: a\n    condition: |\n      input_length > 3\n"
     "      &&\n", [(5, 9, "")]),
    ("folded", "routing_matrix:\n  - rule_name: a\n    condition: >\n      input_length > 3 &&\n"
     "      foo > 1\n", [(5, 7, "foo")]),
    ("folded-after-a-blank-line", "routing_matrix:\n  - rule_name: a\n    condition: >-\n      input_length > 3\n\n"
     "        || 2 > 1 && foo > 1\n", [(6, 21, "foo")]),
    ("plain-one-line", "routing_matrix:\n  - rule_name: a\n    condition: input_length > 3 && foo > 1\n",
     [(3, 36, "foo")]),
    ("plain-two-lines", "routing_matrix:\n  - rule_name: a\n    condition: input_length > 3 &&\n      foo > 1\n",
     [(4, 7, "foo")]),
    ("double-quoted-with-escapes", 'routing_matrix:\n  - rule_name: a\n    condition: "intent == \\"x\\" && foo > 1"\n',
     [(3, 36, "foo")]),
    ("double-quoted-over-lines", 'routing_matrix:\n  - rule_name: a\n    condition: "intent ==\\\n'
     "      \\ 'x' && foo > 1\"\n", [(4, 16, "foo")]),
    ("single-quoted-with-escapes", "routing_matrix:\n  - rule_name: a\n    condition: 'intent == ''x'' && foo > 1'\n",
     [(3, 36, "foo")]),
    ("dsl-literal", 'routing_dsl: |\n  IF input_length > 3\n    THEN route_to("qwen-vl")\n'
     "    WITH timeout=8000xs, burst_window=2s\n", [(4, 18, "8000xs"), (4, 26, "burst_window")]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in YAML_POSITIONS], ids=[c[0] for c in YAML_POSITIONS])
def test_errors_in_yaml_values_point_at_the_file(text: str, expected: list[tuple[int, int, str]]) -> None:
    with pytest.raises(PolicyError) as exc:
        compile_policy(text, "m.yaml", FIN)
    assert [(line, col) for line, col, _ in exc.value.located] == [(line, col) for line, col, _ in expected]
    lines = text.splitlines()
    for line, col, token in expected:  # the table itself is checked against the text ("": just after the line)
        assert lines[line - 1][col - 1:].startswith(token) if token else col == len(lines[line - 1].rstrip()) + 1


def test_an_error_in_the_shipped_dsl_points_at_the_file(tmp_path: Path) -> None:
    text = (ROOT / "policies" / "seed003.yaml").read_text(encoding="utf-8")
    assert "  ELSE IF query_length > 1024 \n" in text
    bad = tmp_path / "seed003.yaml"
    bad.write_text(text.replace("  ELSE IF query_length > 1024", "  ELSE ELSE query_length > 1024"), encoding="utf-8")
    with pytest.raises(PolicyError) as exc:
        load_policy(bad, FIN)
    (line, col, message), = exc.value.located
    else_if = text.splitlines().index("  ELSE IF query_length > 1024 ") + 1  # below the file's header comment
    assert (line, col) == (else_if, 8) and message.startswith("unexpected 'ELSE'")
    assert text.splitlines()[line - 1][col - 1:].startswith("IF")  # where the second ELSE now stands


def test_dsl_clauses_in_a_yaml_block_have_their_file_origin() -> None:
    text = (ROOT / "policies" / "seed003.yaml").read_text(encoding="utf-8").splitlines()
    first = text.index('  IF intent == "legal" AND file_type == "pdf" ') + 1
    rules = load_policy(ROOT / "policies" / "seed003.yaml", FIN)
    assert [(r.origin.line, r.origin.col) for r in rules.rules] == [(first, 3), (first + 3, 8)]  # "  ELSE IF"'s IF


def test_a_key_given_twice_in_a_policy_is_refused() -> None:
    text = ("routing_matrix:\n  - rule_name: a\n    primary_target: qwen-vl\n"
            "routing_matrix:\n  - rule_name: b\n    primary_target: llama3-8b\n    primary_target: qwen-vl\n")
    with pytest.raises(PolicyError) as exc:
        compile_policy(text, "m.yaml", FIN)
    assert str(exc.value).splitlines() == [
        "m.yaml:4:1: routing_matrix: duplicate key, first at line 1 (YAML would silently keep only the last)",
        "m.yaml:7:5: routing_matrix[0].primary_target: duplicate key, first at line 6 "
        "(YAML would silently keep only the last)",
    ]


def test_a_key_that_overrides_a_merge_is_not_a_duplicate() -> None:
    text = ("x-base: &base {primary_target: qwen-vl, priority: high}\nrouting_matrix:\n"
            "  - <<: *base\n    rule_name: a\n    primary_target: llama3-8b\n")
    with pytest.raises(PolicyError, match="x-base: the router cannot act on this field"):
        compile_policy(text, "m.yaml", FIN)  # the merge is read (no duplicate-key error), x-base is refused as usual
