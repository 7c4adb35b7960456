"""The Streamlit app: :data:`ENTRYPOINT` is what ``routelens app`` runs.

``streamlit_app.py`` only sets up navigation; ``views/`` are the thin page scripts; ``data/`` and
``charts/`` are pure functions (DataFrames, plotly figures) the views call; ``resources.py`` holds
the cached trace store and ``widgets.py`` the inputs shared by pages. Shared by pages too:
``sidebar.py`` (the scope every page shares, kept in the URL), ``timeseries.py`` (bucket size,
gaps, the partial last bucket of a chart over time), ``limits.py`` (the limits the app colours
by, from the running configuration), ``probe_limit.py`` (a probe kind's bound and how a value reads
against it), ``probe_traffic.py`` (the page sections that link probes to traffic) and
``misroute_form.py`` (marking a decision a misroute and turning it into a regression case).
"""

from pathlib import Path

__all__ = ["ENTRYPOINT"]

ENTRYPOINT = Path(__file__).resolve().with_name("streamlit_app.py")
