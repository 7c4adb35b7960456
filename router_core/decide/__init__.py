"""One decision: the request analysed, the policy built from the configuration, the router deciding, the trace recorded.

``router`` (:class:`Router`: the gateway has analysed the request and matched its rule before
:meth:`Router.decide`, which records both, then filters, scores, picks and falls back), ``filtering`` (the
filter step, :class:`Filters`), ``scoring`` (the score step, :class:`Scores`), ``runner`` (what
those two share), ``fallback`` (a rule's levels, and the fallbacks when nothing is feasible),
``policy`` (what a configuration builds: plugins, weights, picker; its hash),
``plugin_specs`` (the configuration sections read as plugin specs), ``policy_doc`` (the effective
policy as one document, its hash, and the policy a stored document decides with again),
``builtin`` (the explicit list of in-tree plugins), ``prepared`` (per-snapshot memo of state-only
verdicts and terms), ``decision`` (the context a decision reads and the decision it returns),
``analysis``, ``attachments`` and ``media_tokens`` (a request's features), ``recorder`` (the trace of one request),
``replay`` (a stored request decided again) and ``verify`` (whether a re-decided trace is the same
decision: the first difference). Import from the modules; this package imports nothing, so that a
module of it never drags the others in.
"""
