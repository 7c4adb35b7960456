"""Routing policies: the routing matrix and the routing DSL, compiled to one rule set the router runs.

::

    condition text ──┐
    matrix YAML ─────┼─► Rule(...)  ─► RuleSet.match(RequestView) ─► (Rule | None, clauses tried)
    DSL text ────────┘

``request`` holds what a condition may read (:class:`RequestView`), ``ir`` the compiled form,
``condition`` the one condition language (a lark grammar, never ``eval``), ``dsl`` the DSL,
``load`` a policy file of either kind (the seed's YAML routing matrix and/or DSL), ``file_checks``
what no schema of the file can refuse (a ``max_wait`` never waited, a rule name taken), ``index`` which
rules can match a request from a few lookups, ``tried`` the rules tried for one request and why
the ones before the match failed, ``route`` a matched rule as the router runs it (levels,
guarantee, cost scale; peak hours), ``throttle`` the rules' token buckets and their wait queue,
``keywords`` the rule-enhanced keyword score, ``cases`` a policy file's own test cases and the
explanation of a request (the rule matched and why).
"""
