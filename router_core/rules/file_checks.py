"""Checks of a policy file that no schema can make: what it wrote would be silently not done.

A ``max_wait`` that is never waited, a rule name another rule has (two rules of one name share a
throttle bucket and no trace tells them apart), a test case expecting a rule the file does not have
(it could only fail, as a typo), rules written but empty (said where). Each problem is
``(line, column, message)`` at the place written; :mod:`router_core.rules.load` collects them with
the file's other problems.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml

from router_core.rules.ir import Rule
from router_core.rules.route import KEYWORDS_RULE
from schemas.policy_file import MatrixRule, PolicyFileSpec
from schemas.yamlconf import node_at

__all__ = ["duplicate_names", "empty_rules", "reserved_names", "throttle_problems", "unknown_case_rules"]

Problems = list[tuple[int, int, str]]


def _pos(node: yaml.Node | None) -> tuple[int, int]:
    return (1, 1) if node is None else (node.start_mark.line + 1, node.start_mark.column + 1)


def throttle_problems(entry: MatrixRule, i: int, root: yaml.Node | None) -> Problems:
    """A ``max_wait`` without ``overflow: wait``: the wait it asks for would never be taken."""
    t = entry.throttle_config
    if t is None or "max_wait" not in t.model_fields_set or t.overflow == "wait":
        return []
    return [(*_pos(node_at(root, ("routing_matrix", i, "throttle_config", "max_wait"), key=True)),
             f"routing_matrix[{i}].throttle_config.max_wait: applies only with overflow: wait "
             f"(this throttle's overflow is {t.overflow}: a request finding the bucket empty "
             f"{'goes down the chain' if t.overflow == 'chain' else 'is refused'} at once)")]


def reserved_names(spec: PolicyFileSpec, clauses: Sequence[Rule], root: yaml.Node | None) -> Problems:
    """A matrix rule named as a DSL clause of the file or as the implicit keywords rule.

    Two rules of one name would share a throttle bucket and be told apart in no trace.
    """
    taken = {r.name: "a clause of this file's routing_dsl (the DSL names its clauses clause-1, clause-2..., else)"
             for r in clauses}
    taken[KEYWORDS_RULE] = "the rule routing.keywords routes by"
    return [(*_pos(node_at(root, ("routing_matrix", i, "rule_name"))),
             f"routing_matrix[{i}].rule_name: {entry.rule_name!r} is the name of {taken[entry.rule_name]}")
            for i, entry in enumerate(spec.routing_matrix) if entry.rule_name in taken]


def duplicate_names(data: Mapping[str, object], root: yaml.Node | None) -> list[tuple[tuple[int, int, str], str]]:
    """Each ``rule_name`` given to an earlier matrix rule too, at the later one."""
    matrix = data.get("routing_matrix")
    first: dict[str, int] = {}
    found: list[tuple[tuple[int, int, str], str]] = []
    for i, entry in enumerate(matrix if isinstance(matrix, list) else []):
        name = entry.get("rule_name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            continue
        line, col = _pos(node_at(root, ("routing_matrix", i, "rule_name")))
        if name in first:
            found.append(((line, col, f"routing_matrix[{i}].rule_name"),
                          f"rule_name used twice: {name} (first at line {first[name]})"))
        else:
            first[name] = line
    return found


def empty_rules(data: Mapping[str, object], root: yaml.Node | None) -> list[tuple[tuple[int, int, str], str]]:
    """``routing_matrix`` and ``routing_dsl`` both without a rule: each one written, at its value.

    The file's "needs routing_matrix or routing_dsl" would read as if the key were missing. Nothing
    when either has a rule, or when neither is written (that is the file's, at its first line).
    """
    matrix, dsl = data.get("routing_matrix"), data.get("routing_dsl")
    if matrix or (isinstance(dsl, str) and dsl.strip()):
        return []
    return [((*_pos(node_at(root, (key,))), key),
             "empty (no rule): a policy file needs a rule in routing_matrix or routing_dsl")
            for key in ("routing_matrix", "routing_dsl") if key in data]


def unknown_case_rules(spec: PolicyFileSpec, rules: Sequence[Rule], root: yaml.Node | None) -> Problems:
    """A test case whose ``expect.rule`` names no rule of the file: it could only fail (a typo, a rule renamed)."""
    names = [r.name for r in rules]
    return [(*_pos(node_at(root, ("tests", i, "expect", "rule"))),
             f"tests[{i}] ({case.name!r}): expect.rule {case.expect.rule!r} names no rule of this file (rules: "
             f"{', '.join(names)}; null for a case no rule matches)")
            for i, case in enumerate(spec.tests) if case.expect.rule is not None and case.expect.rule not in names]
