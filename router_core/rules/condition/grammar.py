"""The lark grammar of conditions and of the routing DSL, and the one LALR parser built from it.

The grammar lives here as a string (package data ships only YAML/SQL/JSON). Both languages share
the ``condition`` rule, so a condition means the same in the matrix and in a DSL ``IF``.
Keywords are case-insensitive regexes ending at a word boundary, with a priority above ``NAME``:
``android`` stays a name, ``AND``/``and`` is the operator.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from lark import Lark, Token, Tree

__all__ = ["GRAMMAR", "parse"]

GRAMMAR = r"""
// ---- conditions -----------------------------------------------------------------------------
?condition: or_expr
// Left-recursive, not ``and_expr (_OR and_expr)*``: lark copies the children of a repeated
// group at every step (quadratic in the atoms); the compiler flattens these chains instead.
?or_expr: and_expr | or_expr _OR and_expr
?and_expr: not_expr | and_expr _AND not_expr
?not_expr: _NOT not_expr                      -> not_
         | primary
?primary: "(" or_expr ")"                     -> group
        | operand COMP_OP operand             -> compare
        | operand _IN list                    -> in_
        | operand _NOT _IN list               -> not_in
        | operand                             -> bare

?operand: feature | call | literal
feature: NAME ("." NAME)*
call: NAME "(" [operand ("," operand)*] ")"
list: "[" [literal ("," literal)*] "]"
?literal: STRING -> string
        | NUMBER -> number
        | TRUE   -> true
        | FALSE  -> false
        | NULL   -> null

// ---- the routing DSL ------------------------------------------------------------------------
dsl: if_clause else_if* else_clause?
if_clause: IF condition _THEN action
else_if: ELSE if_clause
else_clause: ELSE action
action: ROUTE_TO "(" STRING ")" [_WITH option ("," option)*]
option: NAME "=" opt_value
?opt_value: STRING                            -> opt_string
          | BARE                              -> opt_bare
          | "[" [STRING ("," STRING)*] "]"    -> opt_list

// ---- terminals ------------------------------------------------------------------------------
_OR.3: "||" | /or\b/i
_AND.3: "&&" | /and\b/i
_NOT.3: "!" | /not\b/i
_IN.3: /in\b/i
TRUE.3: /true\b/i
FALSE.3: /false\b/i
NULL.3: /null\b/i
IF.3: /if\b/i
_THEN.3: /then\b/i
ELSE.3: /else\b/i
_WITH.3: /with\b/i
ROUTE_TO.3: /route_to\b/i
COMP_OP.4: "==" | "!=" | "<=" | ">=" | "<" | ">"
NAME: /[^\W\d]\w*/
NUMBER: /-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/
STRING: /"(?:[^"\\\n]|\\.)*"/ | /'(?:[^'\\\n]|\\.)*'/
BARE: /[\w.+-]+/
COMMENT: /#[^\n]*/
%ignore /\s+/
%ignore COMMENT
"""


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """Build the LALR parser once (a few milliseconds); every compile reuses it."""
    return Lark(GRAMMAR, parser="lalr", lexer="contextual", start=["condition", "dsl"],
                propagate_positions=True, maybe_placeholders=True)


def parse(text: str, start: Literal["condition", "dsl"]) -> Tree[Token]:
    """Parse ``text`` from the ``condition`` or ``dsl`` rule.

    Raises:
        lark.exceptions.UnexpectedInput: On a syntax error (translated by :mod:`.locate`).
    """
    return _parser().parse(text, start=start)
