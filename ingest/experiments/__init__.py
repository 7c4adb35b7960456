"""Experiment analysis: pure statistics (:mod:`.stats`), the per-arm comparison and the propensity estimate."""
