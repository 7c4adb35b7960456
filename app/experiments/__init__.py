"""Experiments over stored traces: counterfactual replay of a time range under another policy.

:func:`app.experiments.replay_range.replay_range` is the entry point; :mod:`.policy_file` loads the
policy to replay under, :mod:`.bulk` reads a trace file in bulk, :mod:`.replayer` re-decides with
the router's own ``rank`` and ``pick`` (:mod:`.replay_memo` sharing work between rows), :mod:`.tally`
counts. :mod:`.rows` holds a stored trace as the few values a replay reads (:class:`ReplayRow`);
:mod:`.verify` is ``routelens replay --verify``, every stored decision of a window re-decided
under its own policy, a trace file's window read whole in bulk by :mod:`.stored_traces`, in one
process per time range when large (:mod:`.by_range`). :mod:`._collector` tunes the garbage
collector for a replay's duration.
"""
