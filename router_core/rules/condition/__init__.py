"""The one condition language of routing policies, compiled to closures (never ``eval``).

::

    input_length > 8000 || contains_legal_terms(prompt)
    prompt_contains('紧急') && request_time.hour in [9, 11, 14, 16]

``grammar`` holds the lark grammar (shared with the DSL), ``locate`` file positions and syntax
errors, ``features`` what a condition reads, ``domains`` the values a bounded feature can take,
``literals`` strings and numbers, ``ops`` the closures, ``compiler`` the tree walk, ``operands``
its reading of operands, ``compiled`` the result, ``guards`` the atoms one of which must hold for
a condition to be true (what the rule index looks up), ``why_not`` the atoms that decided against
a false condition, ``disclose`` what an explanation may show of a value a condition read.
"""

from router_core.rules.condition.compiled import CompiledCondition
from router_core.rules.condition.compiler import compile_condition

__all__ = ["CompiledCondition", "compile_condition"]
