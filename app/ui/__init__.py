"""The Streamlit app: :data:`ENTRYPOINT` is what ``routelens app`` runs.

``streamlit_app.py`` only sets up navigation; ``views/`` are the thin page scripts; ``data/`` and
``charts/`` are pure functions (DataFrames, plotly figures) the views call; ``resources.py`` holds
the cached trace store and ``widgets.py`` the inputs shared by pages.
"""

from pathlib import Path

__all__ = ["ENTRYPOINT"]

ENTRYPOINT = Path(__file__).resolve().with_name("streamlit_app.py")
