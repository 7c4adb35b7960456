"""Load a policy file (routing matrix and/or DSL in YAML, or a bare ``.dsl``) into a :class:`RuleSet`.

Every problem is a :class:`router_core.errors.PolicyError` naming file, line and column: YAML
syntax, a key given twice, a field the router cannot act on, a condition or DSL error, a target no
instance serves, a chain that loops, a guarantee the fleet cannot be checked against. All problems
of a file are reported at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import yaml
from pydantic import ValidationError

from router_core.config_file import not_utf8
from router_core.errors import PolicyError
from router_core.rules.condition import compile_condition
from router_core.rules.condition.locate import ScalarMap, scalar_map
from router_core.rules.dsl import compile_dsl
from router_core.rules.file_checks import (
    duplicate_names,
    empty_rules,
    reserved_names,
    throttle_problems,
    unknown_case_rules,
)
from router_core.rules.ir import (
    CostParams,
    DegradedTarget,
    Origin,
    ResourceGuarantee,
    Rule,
    RuleSet,
    Throttle,
    TimeoutPolicy,
)
from schemas.config import RouteLensConfig
from schemas.policy_file import MatrixRule, PolicyFileSpec
from schemas.yamlconf import DuplicateKeyError, UniqueKeyLoader, field_name, in_document, node_at, one_per_place

__all__ = ["MAX_POLICY_BYTES", "compile_policy", "load_policy"]

MAX_POLICY_BYTES = 2_000_000
Problems = list[tuple[int, int, str]]


def load_policy(path: str | Path, config: RouteLensConfig, *, strict_cases: bool = False) -> RuleSet:
    """Read and compile the policy file at ``path`` against ``config``'s fleet.

    ``strict_cases``: a test case whose ``expect.rule`` names no rule of the file is a problem of the
    file (``policy check`` and ``policy test``: it could only fail); the gateway, which runs no case,
    does not refuse a policy for it.

    Raises:
        PolicyError: The file cannot be read or does not compile.
    """
    p = Path(path)
    try:
        if p.stat().st_size > MAX_POLICY_BYTES:
            raise PolicyError(str(p), [(1, 1, f"the policy file is larger than {MAX_POLICY_BYTES} bytes")])
        raw = p.read_bytes()
    except OSError as exc:
        raise PolicyError(str(p), [(1, 1, f"cannot read the policy file: {exc.strerror or exc}")]) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # where the first byte that is not UTF-8 is, as the configuration says it
        line, column, byte = not_utf8(raw, exc)
        raise PolicyError(str(p), [(line, column, f"not UTF-8: {byte} (a policy file is UTF-8 text)")]) from exc
    return compile_policy(text, str(p), config, strict_cases=strict_cases)


def compile_policy(text: str, source: str, config: RouteLensConfig, *, strict_cases: bool = False) -> RuleSet:
    """Compile a policy's ``text`` (YAML, or a bare DSL when ``source`` ends in ``.dsl``).

    ``strict_cases``: as :func:`load_policy`'s.

    Raises:
        PolicyError: On any problem, all of them at once.
    """
    routing = config.routing
    if source.endswith(".dsl"):
        clauses = compile_dsl(text, source=source, term_lists=routing.terms())
        _raise(source, _check_targets(clauses, {}, {}, config, {}))
        return RuleSet(rules=clauses, source=source, text=text, timezone=routing.timezone,
                       peak_hours=tuple(routing.peak_hours))
    root, spec = _parse(text, source)
    lines = _LINE_BREAK.split(text)
    terms = {**routing.terms(), **{k: tuple(v) for k, v in spec.term_lists.items()}}
    problems: Problems = []
    rules: list[Rule] = []
    for i, entry in enumerate(spec.routing_matrix):
        problems.extend(throttle_problems(entry, i, root))
        try:
            rules.append(_matrix_rule(entry, i, root, lines, source, terms))
        except PolicyError as exc:
            problems.extend(exc.located)
    if spec.routing_dsl and spec.routing_dsl.strip():
        where = _scalar(node_at(root, ("routing_dsl",)), lines, spec.routing_dsl)
        try:
            clauses = compile_dsl(spec.routing_dsl, source=source, line=where.line, col=where.col, term_lists=terms)
            rules.extend(replace(r, origin=Origin(source, *where.to_file(r.origin.line, r.origin.col)),
                                 spots=tuple((k, *where.to_file(ln, c)) for k, ln, c in r.spots))
                         for r in clauses)
            problems.extend(reserved_names(spec, clauses, root))
        except PolicyError as exc:
            problems.extend(_relocated(exc, where))
    else:
        problems.extend(reserved_names(spec, (), root))
    _raise(source, problems)
    degraded = {name: DegradedTarget(name, d.url, d.canned) for name, d in spec.degraded_targets.items()}
    fallbacks = {m: tuple(chain) for m, chain in spec.model_fallbacks.items()}
    positions = {r.rule_name: i for i, r in enumerate(spec.routing_matrix)}
    problems = _check_targets(tuple(rules), degraded, fallbacks, config, positions, root)
    if strict_cases:
        problems.extend(unknown_case_rules(spec, rules, root))
    _raise(source, problems)
    return RuleSet(rules=tuple(rules), source=source, text=text, degraded=degraded, model_fallbacks=fallbacks,
                   timezone=spec.timezone or routing.timezone, peak_hours=tuple(routing.peak_hours),
                   cases=tuple(spec.tests))


def _raise(source: str, problems: Problems) -> None:
    if problems:
        raise PolicyError(source, sorted(set(problems)))


def _pos(node: yaml.Node | None) -> tuple[int, int]:
    return (1, 1) if node is None else (node.start_mark.line + 1, node.start_mark.column + 1)


_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")  # the breaks PyYAML counts lines by


def _scalar(node: yaml.Node | None, lines: list[str], value: str) -> ScalarMap:
    """Where the characters of the scalar ``value`` (read from ``node``) are in the file.

    The compilers place a text as if copied verbatim from the file; a block, folded or quoted YAML
    value is not, so their positions go through this map (:func:`_relocated`).
    """
    if not isinstance(node, yaml.ScalarNode):
        return ScalarMap(value)
    start, end = node.start_mark, node.end_mark
    return scalar_map(value, lines, node.style, (start.line, start.column), (end.line, end.column))


def _relocated(exc: PolicyError, where: ScalarMap) -> Problems:
    return [(*where.to_file(line, col), message) for line, col, message in exc.located]


_MAX_NESTING = 100  # flow collections ([ and {) open at once: PyYAML would recurse, slowly, into a RecursionError


def _too_deep(text: str) -> tuple[int, int] | None:
    """Where ``text`` first opens more than :data:`_MAX_NESTING` flow collections (line, column), else None."""
    if text.count("[") + text.count("{") <= _MAX_NESTING:
        return None
    depth = line = 0
    start = -1
    for i, ch in enumerate(text):
        if ch == "\n":
            line, start = line + 1, i
        elif ch in "[{":
            depth += 1
            if depth > _MAX_NESTING:
                return line + 1, i - start
        elif ch in "]}":
            depth = max(0, depth - 1)
    return None


def _parse(text: str, source: str) -> tuple[yaml.Node | None, PolicyFileSpec]:
    if (where := _too_deep(text)) is not None:
        raise PolicyError(source, [(*where, f"collections nest deeper than {_MAX_NESTING} levels")])
    try:
        root = yaml.compose(text, Loader=UniqueKeyLoader)
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except DuplicateKeyError as exc:
        raise PolicyError(source, [(d.line, d.col, f"{field_name(d.path)}: {d.message()}")
                                   for d in exc.duplicates]) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise PolicyError(source, [(line, col, f"YAML syntax error: {getattr(exc, 'problem', None) or exc}")]) from exc
    except RecursionError as exc:  # PyYAML composes nested collections recursively ("[[[[..." thousands deep)
        raise PolicyError(source, [(1, 1, "the YAML nests too deeply to read")]) from exc
    if not isinstance(data, dict):
        raise PolicyError(source, [(1, 1, "expected a mapping with routing_matrix and/or routing_dsl")])
    try:
        return root, PolicyFileSpec.model_validate(data)
    except ValidationError as exc:
        found: list[tuple[tuple[int, int, str], str]] = []
        for err in exc.errors():
            if not err["loc"] and (dups := duplicate_names(data, root)):  # the file's "rule_name used twice"
                found.extend(dups)
                continue
            if not err["loc"] and (empty := empty_rules(data, root)):  # "needs rules", where they were written
                found.extend(empty)
                continue
            loc = in_document(data, tuple(p for p in err["loc"] if isinstance(p, (int, str))))
            extra = err["type"] == "extra_forbidden"
            # A check of the whole file (no routing_matrix, no routing_dsl) is the file's, at its first line.
            line, col = _pos(node_at(root, loc, key=extra)) if loc else (1, 1)
            msg = "the router cannot act on this field" if extra else err["msg"].removeprefix("Value error, ")
            found.append(((line, col, field_name(loc) if loc else ""), msg))
        raise PolicyError(source, [(line, col, f"{name}: {msg}" if name else msg)
                                   for (line, col, name), msg in one_per_place(found)]) from exc


def _matrix_rule(entry: MatrixRule, i: int, root: yaml.Node | None, lines: list[str], source: str,
                 terms: Mapping[str, Sequence[str]]) -> Rule:
    line, col = _pos(node_at(root, ("routing_matrix", i)))
    condition = None
    if entry.condition is not None:
        where = _scalar(node_at(root, ("routing_matrix", i, "condition")), lines, entry.condition)
        try:
            condition = compile_condition(entry.condition, source=source, line=where.line, col=where.col,
                                          term_lists=terms)
        except PolicyError as exc:
            raise PolicyError(source, _relocated(exc, where)) from None
    t = entry.throttle_config
    g = entry.resource_guarantee
    return Rule(
        name=entry.rule_name, origin=Origin(source, line, col), condition=condition,
        primary=entry.primary_target, chain=tuple(entry.fallback_chain), priority=entry.priority_level,
        throttle=None if t is None else Throttle(rate=t.max_rps, burst=max(1.0, t.max_rps * t.burst_window),
                                                 overflow=t.overflow, max_wait_s=t.max_wait, bucket=t.bucket),
        timeout=None if entry.timeout_policy is None else TimeoutPolicy(entry.timeout_policy.initial_timeout,
                                                                        entry.timeout_policy.retry_backoff),
        guarantee=None if g is None else ResourceGuarantee(g.min_gpu_mem, g.reserved_cores),
        cost=None if entry.cost_params is None else CostParams(entry.cost_params.base_weight,
                                                               entry.cost_params.surge_multiplier),
    )


def _check_targets(rules: tuple[Rule, ...], degraded: Mapping[str, DegradedTarget],
                   fallbacks: Mapping[str, tuple[str, ...]], config: RouteLensConfig,
                   positions: Mapping[str, int], root: yaml.Node | None = None) -> Problems:
    """Targets exist, chains do not loop, and what rules require can be checked on the fleet."""
    instances = config.fleet.instances
    models = list(dict.fromkeys(s.model for s in instances))
    known = f"models: {', '.join(models)}" + (f"; degraded targets: {', '.join(degraded)}" if degraded else "")
    problems: Problems = []

    def at(rule: Rule, *loc: int | str) -> tuple[int, int]:
        if not rule.spots and rule.name in positions:  # a matrix rule (a DSL clause has spots)
            return _pos(node_at(root, ("routing_matrix", positions[rule.name], *loc)))
        return rule.spot(".".join(str(p) for p in loc[:2]))

    for name in degraded:
        if name in models:
            problems.append((*_pos(node_at(root, ("degraded_targets", name), key=True)),
                             f"degraded target {name!r} has the name of a model"))
    for model, chain in fallbacks.items():
        where = _pos(node_at(root, ("model_fallbacks", model), key=True))
        if model not in models:
            problems.append((*where, f"model_fallbacks names {model!r}, which no instance serves ({known})"))
        for target in chain:
            if target not in models and target not in degraded:
                problems.append((*where, f"model_fallbacks[{model}] names unknown target {target!r} ({known})"))
        if (loop := _loop(model, fallbacks)) is not None:
            problems.append((*where, f"fallback chains loop: {' -> '.join(loop)}"))
    for rule in rules:
        if rule.primary is not None and rule.primary not in models:
            problems.append((*at(rule, "primary_target"),
                             f"rule {rule.name}: primary target {rule.primary!r} is not a model any instance serves "
                             f"({known})"))
        seen = [rule.primary] if rule.primary else []
        for j, target in enumerate(rule.chain):
            if target not in models and target not in degraded:
                problems.append((*at(rule, "fallback_chain", j),
                                 f"rule {rule.name}: fallback target {target!r} does not exist ({known})"))
            if target in seen:
                problems.append((*at(rule, "fallback_chain", j),
                                 f"rule {rule.name}: the chain comes back to {target!r} (a cycle)"))
            seen.append(target)
        targets = [rule.primary] if rule.primary else models
        serving = [s for s in instances if s.model in targets]
        for feature in rule.requires:
            if not any(feature in s.features for s in serving):
                problems.append((*rule.spot("compression"),
                                 f"rule {rule.name}: no instance of {', '.join(targets)} declares feature {feature!r} "
                                 f"(fleet.instances[].features)"))
        g = rule.guarantee
        if g is not None and g.min_free_kv_bytes is not None and (bare := [s.id for s in serving
                                                                          if s.kv_cache_bytes is None]):
            problems.append((*at(rule, "resource_guarantee", "min_gpu_mem"),
                             f"rule {rule.name}: min_gpu_mem needs kv_cache_bytes on instances {', '.join(bare)}"))
    return problems


def _loop(start: str, fallbacks: Mapping[str, tuple[str, ...]]) -> list[str] | None:
    """A path from ``start`` back to itself through ``model_fallbacks``, if there is one."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in fallbacks.get(node, ()):
            if nxt == start:
                return [*path, nxt]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None
