"""Pure data functions for the pages: a trace (or a query) in, pandas DataFrames or plain dicts out.

No Streamlit here, so every function is unit-tested without running a page.
"""
