"""The one condition language of routing policies, compiled to closures (never ``eval``).

::

    input_length > 8000 || contains_legal_terms(prompt)
    prompt_contains('紧急') && request_time.hour in [9, 11, 14, 16]

``grammar`` holds the lark grammar (shared with the DSL), ``locate`` file positions and syntax
errors, ``features`` what a condition reads, ``literals`` strings and numbers, ``ops`` the closures,
``compiler`` the tree walk, ``compiled`` the result.
"""

from router_core.rules.condition.compiled import CompiledCondition
from router_core.rules.condition.compiler import compile_condition

__all__ = ["CompiledCondition", "compile_condition"]
