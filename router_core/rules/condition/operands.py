"""Reading the operands of an atom: literals, features and function calls, each as a :class:`Value`.

:class:`OperandReader` is the part of :class:`~router_core.rules.condition.compiler.ConditionCompiler`
that reads one operand subtree (``'x'``, ``8000``, ``true``, ``null``, ``metadata.tier``,
``header('x-tier')``, ``prompt_contains('...')``, ``contains_<list>(prompt)``) and notes each feature
it reads. An operand that does not compile raises :class:`_Fail` (where and why); the compiler
records it and goes on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from lark import Token, Tree

from router_core.rules.condition.features import (
    FEATURES,
    Value,
    header_getter,
    metadata_getter,
    prompt_matcher,
)
from router_core.rules.condition.literals import BadLiteral, number, string

__all__ = ["Node", "OperandReader"]

Node = Tree[Token] | Token


class _Fail(Exception):
    """An atom that does not compile: where and why (caught by the compiler, never escapes)."""

    def __init__(self, where: Node, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


def _fail(node: Node, message: str) -> NoReturn:
    raise _Fail(node, message)


class OperandReader:
    """Reads operands into values, noting the features read (the base of the condition compiler).

    Args:
        term_lists: The term lists ``contains_<name>(prompt)`` may name.
    """

    def __init__(self, term_lists: Mapping[str, Sequence[str]] | None = None) -> None:
        self._lists = {f"contains_{name}": prompt_matcher(terms) for name, terms in (term_lists or {}).items()}
        # The matcher drops blank terms: a list of none (or only blanks) makes a test that never holds.
        self._no_terms = {f"contains_{name}": name for name, terms in (term_lists or {}).items()
                          if not any(t.strip() for t in terms)}
        self._features: set[str] = set()

    def _value(self, node: Node) -> Value:
        assert isinstance(node, Tree)
        kind, children = node.data, node.children
        token = children[0]
        try:
            if kind == "string":
                return Value("str", const=string(token))  # type: ignore[arg-type]
            if kind == "number":
                return Value("num", const=number(token))  # type: ignore[arg-type]
        except BadLiteral as exc:
            assert isinstance(token, Token)
            _fail(Token(token.type, token, line=token.line, column=(token.column or 1) + exc.offset), str(exc))
        if kind in ("true", "false"):
            return Value("bool", const=kind == "true")
        if kind == "null":
            return Value("null")
        if kind == "feature":
            return self._feature(node, [str(t) for t in children])
        return self._call(node, str(children[0]), [c for c in children[1:] if c is not None])

    def _feature(self, node: Node, names: list[str]) -> Value:
        path = ".".join(names)
        if path in FEATURES:
            self._features.add(path)
            return FEATURES[path]
        head = names[0]
        if head == "metadata":
            if len(names) == 1:
                _fail(node, "name a metadata key, as in metadata.tier")
            self._features.add(path)
            return metadata_getter(names[1:])
        if head == "prompt":
            _fail(node, "the prompt is read only through prompt_contains('...') or contains_<list>(prompt)")
        if head == "request_time":
            _fail(node, "request_time has .hour and .weekday")
        if head in self._functions():
            _fail(node, f"{head} is a function: write {head}(...)")
        known = ", ".join([*sorted(FEATURES), "metadata.<key>"])
        _fail(node, f"unknown feature '{path}'; known: {known}")

    def _functions(self) -> list[str]:
        return sorted(["header", "prompt_contains", *self._lists])

    def _call(self, node: Node, name: str, args: list[Node]) -> Value:
        signature = "(prompt)" if name in self._lists else "('...')"
        if name not in self._functions():
            known = ", ".join(f + ("(prompt)" if f in self._lists else "('...')") for f in self._functions())
            _fail(node, f"unknown function '{name}'; known: {known}")
        if len(args) != 1:
            _fail(node, f"{name} takes one argument, as in {name}{signature}; got {len(args)}")
        arg = args[0]
        self._features.add(name)
        if name in self._lists:
            if not (isinstance(arg, Tree) and arg.data == "feature" and [str(t) for t in arg.children] == ["prompt"]):
                _fail(arg, f"{name} reads the prompt: write {name}(prompt)")
            if name in self._no_terms:
                _fail(node, f"{name}(prompt) never holds: the term list {self._no_terms[name]!r} has no terms")
            return Value("bool", get=self._lists[name])
        literal = self._value(arg)
        if literal.type != "str" or literal.get is not None:
            _fail(arg, f"{name} takes a string in quotes, as in {name}('...')")
        text: Any = literal.const
        if not text.strip():  # a blank needle is dropped by the matcher: the test would never hold
            _fail(arg, f"{name} needs a string with something other than spaces in it")
        if name == "header":
            return header_getter(text)
        return Value("bool", get=prompt_matcher([text]))
