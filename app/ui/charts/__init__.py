"""Pure plotly figure builders: a DataFrame from :mod:`app.ui.data` in, a ``go.Figure`` out.

One module per chart family; no Streamlit here (the views call ``st.plotly_chart``).
"""
