"""Experiments over stored traces: counterfactual replay of a time range under another policy.

:func:`app.experiments.replay_range.replay_range` is the entry point; :mod:`.policy_file` loads the
policy to replay under, :mod:`.bulk` reads a trace file in bulk, :mod:`.replayer` re-decides with
the router's own ``rank`` and ``pick`` (:mod:`.replay_memo` sharing work between rows), :mod:`.tally`
counts.
"""
