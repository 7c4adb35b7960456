"""Scorers: one per file."""
