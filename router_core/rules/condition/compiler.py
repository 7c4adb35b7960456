"""From a parse tree to closures: names resolved, types checked, every problem located.

The compiler walks the tree once. An atom that does not compile records its error and the walk
goes on, so one :class:`PolicyError` lists every problem of a condition (or of a whole DSL).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from lark import Token, Tree
from lark.exceptions import UnexpectedInput

from router_core.rules.condition import guards as guard
from router_core.rules.condition import ops
from router_core.rules.condition.compiled import Atom, CompiledCondition
from router_core.rules.condition.domains import out_of_domain
from router_core.rules.condition.features import Type, Value
from router_core.rules.condition.grammar import parse
from router_core.rules.condition.guards import Guard, Guards
from router_core.rules.condition.locate import Locator, policy_error, syntax_error
from router_core.rules.condition.operands import Node, OperandReader, _Fail, _fail
from router_core.rules.condition.why_not import Fact
from router_core.rules.condition.why_not import Node as Shape

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "ConditionCompiler", "compile_condition"]

MAX_LENGTH = 10_000
MAX_DEPTH = 64
_TYPE_NAMES: dict[Type, str] = {"num": "a number", "str": "a string", "bool": "true/false", "null": "null",
                                "any": "a metadata value"}
_ORDERING = frozenset({"<", "<=", ">", ">="})
_GUARD_OPS: dict[str, Literal["in", "<", "<=", ">", ">="]] = {"==": "in", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _pos(node: Node) -> tuple[int, int]:
    if isinstance(node, Token):
        return node.line or 1, node.column or 1
    return node.meta.line, node.meta.column


def _chain(node: Tree[Token]) -> list[Node]:
    """Return the operands of a left-nested ``a || b || c`` in order, without recursion."""
    operands: list[Node] = []
    current: Node = node
    while isinstance(current, Tree) and current.data == node.data:
        left, right = current.children
        operands.append(right)
        current = left
    operands.append(current)
    return operands[::-1]


def _guard(value: Value, op: Literal["in", "<", "<=", ">", ">="], consts: tuple[Any, ...]) -> Guards:
    """The atom as a guard when it reads a named feature (a prompt test has no label: unguarded)."""
    if value.get is None or value.label is None:
        return None
    return (Guard(value.label, value.get, op, consts),)


class ConditionCompiler(OperandReader):
    """Compiles condition subtrees of one text, collecting errors (operands: :class:`OperandReader`).

    Args:
        loc: The locator of the parsed text.
        term_lists: The term lists ``contains_<name>(prompt)`` may name.
    """

    def __init__(self, loc: Locator, term_lists: Mapping[str, Sequence[str]] | None = None) -> None:
        super().__init__(term_lists)
        self.loc = loc
        self.errors: list[tuple[int, int, str]] = []
        self._atoms: list[Atom] = []
        self._named: dict[str, set[Any]] = {}

    def error(self, node: Node, message: str) -> None:
        """Record a problem at ``node``."""
        self.errors.append((*self.loc.at(*_pos(node)), message))

    def compile(self, node: Node) -> CompiledCondition:
        """Return the condition of ``node`` (check :attr:`errors` before using it)."""
        self._atoms, self._features, self._named = [], set(), {}
        pred, guards, tree = self._expr(node, 0)
        text = self._text(node)
        # A header or metadata value equal to a literal the condition compares it against is named by
        # the policy: explanations may show it (any atom's, not only the one naming it).
        named = {label: frozenset(values) for label, values in self._named.items()}
        atoms = [atom.naming(named) for atom in self._atoms]
        return CompiledCondition(text, pred, atoms, frozenset(self._features), guards, tree)

    def _name(self, value: Value, literals: Iterable[Any]) -> None:
        """Note the literals ``value`` (a feature) is compared against."""
        if value.label is not None:
            self._named.setdefault(value.label, set()).update(x for x in literals if x is not None)

    def _text(self, node: Node) -> str:
        if isinstance(node, Token):
            start, end = node.start_pos or 0, node.end_pos or 0
        else:
            start, end = node.meta.start_pos, node.meta.end_pos
        return self.loc.text[start:end]

    # ---- structure --------------------------------------------------------------------------

    def _expr(self, node: Node, depth: int) -> tuple[ops.Pred, Guards, Shape]:
        if depth > MAX_DEPTH:
            self.error(node, f"the condition nests deeper than {MAX_DEPTH} levels")
            return ops.constant(False), None, Shape("atom", ops.constant(False))  # an error: never run
        if isinstance(node, Tree) and node.data in ("or_expr", "and_expr"):
            parts = [self._expr(child, depth + 1) for child in _chain(node)]
            preds, sides, trees = [p for p, _, _ in parts], [g for _, g, _ in parts], tuple(t for _, _, t in parts)
            if node.data == "or_expr":
                pred = ops.any_of(preds)
                return pred, guard.any_of(sides), Shape("or", pred, trees)
            pred = ops.all_of(preds)
            return pred, guard.all_of(sides), Shape("and", pred, trees)
        if isinstance(node, Tree) and node.data in ("not_", "group"):
            inner, guards, tree = self._expr(node.children[0], depth + 1)
            if node.data == "group":
                return inner, guards, tree
            pred = ops.negate(inner)
            return pred, None, Shape("not", pred, (tree,))
        reads: list[Value] = []
        fact: Fact | None = None
        try:
            pred, guards, fact = self._atom(node, reads)
        except _Fail as exc:
            self.error(exc.where, exc.message)
            pred, guards = ops.constant(False), None
        text = self._text(node)
        shape = Shape("atom", pred, atom=len(self._atoms))
        self._atoms.append(Atom(" ".join(text.split()) if "\n" in text else text, pred, tuple(reads), fact))
        return pred, guards, shape

    def _atom(self, node: Node, reads: list[Value]) -> tuple[ops.Pred, Guards, Fact | None]:
        assert isinstance(node, Tree)  # the grammar: every atom is a compare/in_/not_in/bare tree
        kind, children = node.data, node.children
        if kind == "compare":
            left_node, op_token, right_node = children
            left, right = self._value(left_node), self._value(right_node)
            reads.extend(v for v in (left, right) if v.label)
            op = str(op_token)
            pred = self._compare(node, left, op, right)
            literal = right_node
            if left.get is None and right.get is not None:
                left, right, op, literal = right, left, ops.MIRROR[op], left_node
            fact = None
            if left.get is not None and left.label is not None and right.get is None:
                fact = Fact.compare(left, op, right.const)
                self._name(left, (right.const,))
                self._in_domain(literal, left, op, right.const)
            if right.get is None and right.const is not None and op in _GUARD_OPS:
                return pred, _guard(left, _GUARD_OPS[op], (right.const,)), fact
            return pred, None, fact
        if kind in ("in_", "not_in"):
            value = self._value(children[0])
            reads.extend([value] if value.label else [])
            pred = self._member(node, value, children[1], negated=kind == "not_in")
            consts = tuple(self._value(item).const for item in children[1].children  # type: ignore[union-attr]
                           if item is not None)
            fact = None
            if value.get is not None and value.label is not None:
                fact = Fact.member(value, consts, negated=kind == "not_in")
                self._name(value, consts)
                for item in children[1].children:  # type: ignore[union-attr]
                    if item is not None:
                        self._in_domain(item, value, "not in" if kind == "not_in" else "in", self._value(item).const)
            return pred, _guard(value, "in", consts) if kind == "in_" else None, fact
        value = self._value(children[0])
        if value.type == "bool":
            if value.get is None:
                return ops.constant(bool(value.const)), None, None
            fact = Fact.pattern(self._text(node)) if value.label is None else Fact.boolean(value)
            return value.get, _guard(value, "in", (True,)), fact
        if value.type == "any":
            reads.append(value)
            assert value.get is not None and value.label is not None
            # `is True`; the guard's `== True` is wider
            return ops.truthy(value.get), _guard(value, "in", (True,)), Fact.boolean(value)
        _fail(node, f"{self._text(children[0])} is {_TYPE_NAMES[value.type]}, not true/false: compare it, "
                    f"as in {self._text(children[0])} == ...")

    def _in_domain(self, literal: Node, feature: Value, op: str, const: Any) -> None:
        """Record a problem at ``literal`` when ``feature`` (hour, weekday) never takes it (:mod:`.domains`)."""
        if (problem := out_of_domain(feature.label, op, const)) is not None:
            self.error(literal, problem)

    def _compare(self, node: Node, left: Value, op: str, right: Value) -> ops.Pred:
        if left.get is None and right.get is not None:
            left, right, op = right, left, ops.MIRROR[op]
        types = {left.type, right.type}
        if "null" in types:
            if op not in ("==", "!="):
                _fail(node, f"null compares only with == or !=, not {op}")
            if left.get is None:  # null == null, or null == a literal
                return ops.constant((left.const is None and right.const is None) == (op == "=="))
            return ops.is_null(left.get, op == "!=")
        if op in _ORDERING and not types <= {"num", "any"}:
            bad = left if left.type not in ("num", "any") else right
            _fail(node, f"{op} compares numbers; {self._describe(bad)} is {_TYPE_NAMES[bad.type]}")
        if len(types) > 1 and "any" not in types:
            _fail(node, f"{self._describe(left)} is {_TYPE_NAMES[left.type]} and {self._describe(right)} is "
                        f"{_TYPE_NAMES[right.type]}: they never compare equal")
        checked = "any" not in types
        if left.get is None:  # two literals
            return ops.constant(bool(ops.OPS[op](left.const, right.const)))
        if right.get is None:
            return ops.compare_const(left.get, op, right.const, nullable=left.nullable, checked=checked)
        return ops.compare(left.get, op, right.get, checked=checked)

    def _member(self, node: Node, value: Value, list_node: Node, *, negated: bool) -> ops.Pred:
        assert isinstance(list_node, Tree)
        items = [self._value(item) for item in list_node.children if item is not None]
        if not items:  # membership of nothing: the rule would be silently dead (or the test silently idle)
            _fail(list_node, f"{self._describe(value)} {'not in [] always' if negated else 'in [] never'} holds: "
                             "the list is empty")
        types = {item.type for item in items}
        if "null" in types:
            _fail(list_node, "null cannot be in a list; test it with == null")
        if len(types) > 1:
            _fail(list_node, "a list holds values of one type: " + " and ".join(_TYPE_NAMES[t] for t in sorted(types)))
        if value.type == "null":
            _fail(node, "null is never in a list; test it with == null")
        if types and value.type != "any" and types != {value.type}:
            _fail(list_node, f"{self._describe(value)} is {_TYPE_NAMES[value.type]}, the list holds "
                             f"{_TYPE_NAMES[types.pop()]}")
        values = frozenset(item.const for item in items)
        if value.get is None:
            return ops.constant((value.const in values) != negated)
        return ops.member(value.get, values, negated=negated, checked=value.type != "any")

    # ---- operands -----------------------------------------------------------------------------

    def _describe(self, value: Value) -> str:
        return value.label or ("a literal" if value.const is None else repr(value.const))


def compile_condition(text: str, *, source: str = "<condition>", line: int = 1, col: int = 1,
                      term_lists: Mapping[str, Sequence[str]] | None = None) -> CompiledCondition:
    """Compile a routing condition, such as ``input_length > 8000 || contains_legal_terms(prompt)``.

    Args:
        text: The condition.
        source: The file it comes from, for errors.
        line: The file line the text starts on.
        col: The file column the text starts at.
        term_lists: Named term lists; each name ``N`` defines ``contains_N(prompt)``.

    Returns:
        The compiled condition.

    Raises:
        PolicyError: On any problem (syntax, unknown name, type, length, nesting), at its file position.
    """
    loc = Locator(text, source, line, col)
    if len(text) > MAX_LENGTH:
        raise loc.error(1, 1, f"the condition is {len(text):,} characters long; the limit is {MAX_LENGTH:,}")
    try:
        tree = parse(text, "condition")
    except UnexpectedInput as exc:
        raise syntax_error(exc, loc) from None
    compiler = ConditionCompiler(loc, term_lists)
    condition = compiler.compile(tree)
    if compiler.errors:
        raise policy_error(source, compiler.errors)
    return condition
