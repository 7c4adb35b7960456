"""One decision: the request analysed, the policy built from the configuration, the router deciding, the trace recorded.

``router`` (:class:`Router`: analyse, policy, filter, score, pick, fallback), ``policy`` (what a
configuration builds: plugins, weights, picker; its hash), ``builtin`` (the explicit list of
in-tree plugins), ``prepared`` (per-snapshot memo of state-only verdicts and terms),
``decision`` (the context a decision reads and the decision it returns), ``analysis`` and
``attachments`` (a request's features), ``recorder`` (the trace of one request) and ``replay``
(a stored request decided again). Import from the modules; this package imports nothing, so
that a module of it never drags the others in.
"""
