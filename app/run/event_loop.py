"""The serving processes' event loop: uvloop's where it installs, asyncio's elsewhere.

uvloop is declared for every platform but Windows (it does not build there); a process started
there runs on asyncio's loop instead of failing at import.
"""

from __future__ import annotations

import asyncio

__all__ = ["new_event_loop"]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when it is installed, else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
