"""Experiment analysis: pure statistics, the per-arm comparison and the propensity estimate.

:mod:`.stats` (intervals, the split check, corrections; latency quantiles from binned counts in
:mod:`.quantiles`), :mod:`.compare` (the per-arm comparison) and :mod:`.ips` (the propensity estimate).
"""
