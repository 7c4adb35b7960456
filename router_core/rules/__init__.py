"""Routing policies: the routing matrix and the routing DSL, compiled to one rule set the router runs.

::

    condition text ──┐
    matrix YAML ─────┼─► Rule(...)  ─► RuleSet.match(RequestView) ─► (Rule | None, clauses tried)
    DSL text ────────┘

``request`` holds what a condition may read (:class:`RequestView`), ``ir`` the compiled form,
``condition`` the one condition language (a lark grammar, never ``eval``), ``dsl`` the DSL,
``matrix`` the seed's YAML routing matrix, ``load`` a policy file of either kind.
"""
