"""Pickers: one per file; ``_tiebreak`` holds the ordering they share."""
