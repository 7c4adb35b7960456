"""The routing DSL, compiled to rules.

::

    IF intent == "legal" AND file_type == "pdf"
      THEN route_to("qwen-vl")
      WITH timeout=8000ms, fallback="llama3-8b"
    ELSE IF query_length > 1024
      THEN route_to("llama3-8b")
      WITH compression="flash-attn"
    ELSE route_to("llama3-8b")

Each ``IF`` is a rule (``clause-1``, ``clause-2``...; the final ``ELSE`` is ``else``), tried in
order. Conditions are the condition language (:mod:`router_core.rules.condition`, same grammar).
Keywords are case-insensitive, ``#`` starts a comment, whitespace and newlines are free.
Whether the targets exist is the loader's question, not this module's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from lark import Token, Tree
from lark.exceptions import UnexpectedInput

from router_core.rules.condition.compiler import MAX_LENGTH, ConditionCompiler
from router_core.rules.condition.grammar import parse
from router_core.rules.condition.literals import BadLiteral, string
from router_core.rules.condition.locate import Locator, policy_error, syntax_error
from router_core.rules.ir import Condition, Origin, Rule, Throttle, TimeoutPolicy

__all__ = ["MAX_DSL_LENGTH", "compile_dsl"]

MAX_DSL_LENGTH = 100_000  # parsing takes about 10 µs a token: a limit keeps a load under a second or two
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0}
_PRIORITIES = {"high": 2, "normal": 1, "low": 0}
_OVERFLOWS = ("chain", "reject", "wait")
_MAX_WAIT_S = 60.0


class _Bad(Exception):
    """An option value that does not parse (caught here, reported as a PolicyError)."""

    def __init__(self, where: Tree[Token] | Token, message: str) -> None:
        super().__init__(message)
        self.where, self.message = where, message


def _pos(node: Tree[Token] | Token) -> tuple[int, int]:
    if isinstance(node, Token):
        return node.line or 1, node.column or 1
    return node.meta.line, node.meta.column


def _scalar(node: Tree[Token]) -> str:
    if node.data == "opt_list":
        raise _Bad(node, "expected one value, not a list")
    token = cast(Token, node.children[0])
    try:
        return string(token) if node.data == "opt_string" else str(token)
    except BadLiteral as exc:
        raise _Bad(token, str(exc)) from None


def _duration(node: Tree[Token]) -> float:
    text = _scalar(node)
    match = _DURATION.fullmatch(text)
    if match is None:
        raise _Bad(node, f"bad duration {text!r}: write it as 8000ms, 8s, 1.5s or 2m")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds <= 0:
        raise _Bad(node, f"the duration {text} must be above zero")
    return seconds


def _positive(node: Tree[Token]) -> float:
    text = _scalar(node)
    try:
        value = float(text)
    except ValueError:
        raise _Bad(node, f"expected a number, not {text!r}") from None
    if not 0 < value < float("inf"):
        raise _Bad(node, f"expected a number above zero, not {text}")
    return value


def _max_wait(node: Tree[Token]) -> float:
    seconds = _duration(node)
    if seconds > _MAX_WAIT_S:
        raise _Bad(node, f"max_wait is at most {_MAX_WAIT_S:.0f}s (as in a routing matrix)")
    return seconds


def _bucket(node: Tree[Token]) -> str:
    name = _scalar(node)
    if not name.strip():
        raise _Bad(node, "expected a bucket name")
    return name


def _targets(node: Tree[Token]) -> tuple[str, ...]:
    if node.data != "opt_list":
        return (_model(node),)
    items = [c for c in node.children if c is not None]
    if not items:
        raise _Bad(node, "the fallback list is empty")
    return tuple(_model(Tree("opt_string", [c], node.meta)) for c in items)


def _model(node: Tree[Token]) -> str:
    name = _scalar(node)
    if not name.strip():
        raise _Bad(node, "expected a model name")
    return name


def _priority(node: Tree[Token]) -> int:
    text = _scalar(node)
    if text.lower() in _PRIORITIES:
        return _PRIORITIES[text.lower()]
    if re.fullmatch(r"-?\d{1,9}", text):
        return int(text)
    raise _Bad(node, f"priority is high, normal, low or a whole number, not {text!r}")


def _overflow(node: Tree[Token]) -> str:
    text = _scalar(node).lower()
    if text not in _OVERFLOWS:
        raise _Bad(node, f"overflow is chain, reject or wait, not {text!r}")
    return text


_OPTIONS: dict[str, Callable[[Tree[Token]], Any]] = {
    "timeout": _duration, "retry_backoff": _duration, "fallback": _targets, "compression": _model,
    "priority": _priority, "max_rps": _positive, "burst_window": _duration, "overflow": _overflow,
    "max_wait": _max_wait, "bucket": _bucket,
}
# An option that means something only with another: (option, the option it needs).
_NEEDS = [("retry_backoff", "timeout"), ("burst_window", "max_rps"), ("overflow", "max_rps"),
          ("max_wait", "max_rps"), ("bucket", "max_rps")]


@dataclass
class _Clause:
    """What one ``THEN route_to(...) WITH ...`` says."""

    primary: str
    options: dict[str, Any]
    spots: tuple[tuple[str, int, int], ...] = ()


class _DslCompiler:
    """Walks the DSL tree; collects every error before raising."""

    def __init__(self, loc: Locator, term_lists: Mapping[str, Sequence[str]] | None) -> None:
        self.loc = loc
        self.conditions = ConditionCompiler(loc, term_lists)
        self.errors = self.conditions.errors  # one list for conditions and options

    def fail(self, node: Tree[Token] | Token, message: str) -> None:
        self.errors.append((*self.loc.at(*_pos(node)), message))

    def rules(self, tree: Tree[Token]) -> tuple[Rule, ...]:
        rules: list[Rule] = []
        for clause in tree.children:
            assert isinstance(clause, Tree)
            if clause.data == "if_clause":
                rules.append(self._if(clause, len(rules) + 1))
            elif clause.data == "else_if":
                rules.append(self._if(cast(Tree[Token], clause.children[1]), len(rules) + 1))
            else:
                keyword, action = clause.children
                rules.append(self._rule("else", cast(Token, keyword), None, cast(Tree[Token], action)))
        return tuple(rules)

    def _if(self, node: Tree[Token], number: int) -> Rule:
        keyword, cond_node, action = node.children
        assert isinstance(cond_node, Tree | Token)
        condition: Condition | None = None
        start, end = _span(cond_node)
        if end - start > MAX_LENGTH:
            self.fail(cond_node, f"the condition is {end - start:,} characters long; the limit is {MAX_LENGTH:,}")
        else:
            condition = self.conditions.compile(cond_node)
        return self._rule(f"clause-{number}", cast(Token, keyword), condition, cast(Tree[Token], action))

    def _rule(self, name: str, keyword: Token, condition: Condition | None, action: Tree[Token]) -> Rule:
        _, target, *option_nodes = action.children
        clause = self._action(cast(Token, target), [cast(Tree[Token], o) for o in option_nodes if o is not None])
        o = clause.options
        throttle = None
        if "max_rps" in o:
            rate = float(o["max_rps"])
            overflow = cast(Literal["chain", "reject", "wait"], o.get("overflow", "chain"))
            # As a routing matrix's throttle_config: at least one token held, a second's wait by default.
            throttle = Throttle(rate=rate, burst=max(1.0, rate * float(o.get("burst_window", 1.0))),
                                overflow=overflow, max_wait_s=o.get("max_wait", 1.0), bucket=o.get("bucket"))
        timeout = TimeoutPolicy(o["timeout"], o.get("retry_backoff", 0.0)) if "timeout" in o else None
        return Rule(name=name, origin=Origin(self.loc.source, *self.loc.at(keyword.line or 1, keyword.column or 1)),
                    condition=condition, primary=clause.primary, chain=o.get("fallback", ()),
                    priority=o.get("priority", 1), throttle=throttle, timeout=timeout,
                    requires=(o["compression"],) if "compression" in o else (), spots=clause.spots)

    def _action(self, target: Token, option_nodes: list[Tree[Token]]) -> _Clause:
        try:
            primary = _model(Tree("opt_string", [target]))
        except _Bad as exc:
            self.fail(target, exc.message)
            primary = ""
        options: dict[str, Any] = {}
        names: dict[str, Token] = {}
        spots = [("primary_target", *self.loc.at(*_pos(target)))]
        for option in option_nodes:
            name_token, value = option.children
            assert isinstance(name_token, Token) and isinstance(value, Tree)
            name = str(name_token).lower()
            if name not in _OPTIONS:
                self.fail(name_token, f"unknown option '{name_token}'; known: {', '.join(_OPTIONS)}")
                continue
            if name in names:
                self.fail(name_token, f"{name} is given twice (first at line {self.loc.at(*_pos(names[name]))[0]})")
                continue
            names[name] = name_token
            try:
                options[name] = _OPTIONS[name](value)
            except _Bad as exc:
                self.fail(exc.where, exc.message if exc.message.startswith(name) else f"{name}: {exc.message}")
                continue
            spots.extend(self._spots(name, value))
        for name, needs in _NEEDS:
            if name in names and needs not in names:
                self.fail(names[name], f"{name} needs {needs}")
        if "max_wait" in options and "max_rps" in names and options.get("overflow", "chain") != "wait":
            # Without it the wait is never taken: a request finding the bucket empty goes down the chain or is refused.
            self.fail(names["max_wait"], f"max_wait applies only with overflow=\"wait\" "
                                         f"(this clause's overflow is {options.get('overflow', 'chain')})")
        return _Clause(primary, options, tuple(spots))

    def _spots(self, name: str, value: Tree[Token]) -> list[tuple[str, int, int]]:
        """Where a target-naming option's literals are in the file (the loader reports an unknown one there)."""
        if name == "compression":
            return [("compression", *self.loc.at(*_pos(value)))]
        if name != "fallback":
            return []
        items = [c for c in value.children if c is not None] if value.data == "opt_list" else [value]
        return [(f"fallback_chain.{j}", *self.loc.at(*_pos(item))) for j, item in enumerate(items)]


def _span(node: Tree[Token] | Token) -> tuple[int, int]:
    if isinstance(node, Token):
        return node.start_pos or 0, node.end_pos or 0
    return node.meta.start_pos, node.meta.end_pos


def compile_dsl(text: str, *, source: str = "<dsl>", line: int = 1, col: int = 1,
                term_lists: Mapping[str, Sequence[str]] | None = None) -> tuple[Rule, ...]:
    """Compile routing DSL text to rules, in the order written.

    Args:
        text: The DSL.
        source: The file it comes from, for errors and :attr:`Rule.origin`.
        line: The file line the text starts on.
        col: The file column the text starts at.
        term_lists: Named term lists; each name ``N`` defines ``contains_N(prompt)`` in conditions.

    Returns:
        One rule per ``IF``/``ELSE IF`` clause (``clause-1``...), and ``else`` for a final ``ELSE``.

    Raises:
        PolicyError: Every problem found (syntax, conditions, options), at its file position.
    """
    loc = Locator(text, source, line, col)
    if len(text) > MAX_DSL_LENGTH:
        raise loc.error(1, 1, f"the DSL is {len(text):,} characters long; the limit is {MAX_DSL_LENGTH:,}")
    if all(not ln.strip() or ln.strip().startswith("#") for ln in text.splitlines()):
        raise loc.error(1, 1, "the DSL is empty: write IF <condition> THEN route_to(\"<model>\")")
    try:
        tree = parse(text, "dsl")
    except UnexpectedInput as exc:
        raise syntax_error(exc, loc, "DSL") from None
    compiler = _DslCompiler(loc, term_lists)
    rules = compiler.rules(tree)
    if compiler.errors:
        raise policy_error(source, compiler.errors)
    return rules
