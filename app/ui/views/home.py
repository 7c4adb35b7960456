"""The app's root (``/``): opens the overview at its own address, so ``/overview`` links work too."""

import streamlit as st

st.switch_page("views/overview.py")
