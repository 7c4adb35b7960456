"""Kept for ``tests/test_deploy.py``, which imports it: the loader is :func:`app.config.load_config`."""

from app.config import load_config

__all__ = ["load_config"]
