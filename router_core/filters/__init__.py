"""Hard constraints: one filter per file."""
