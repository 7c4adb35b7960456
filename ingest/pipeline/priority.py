"""Storage threads run at a lower priority than the request path, and show their names to the system."""

from __future__ import annotations

import os
import threading

__all__ = ["lower_priority"]


def lower_priority() -> None:
    """Let the request path win the CPU: storage work runs at a lower priority (Linux: per thread).

    The thread also shows its name to the system (``top -H``, ``/proc/PID/task/TID/comm``, at most
    15 characters), so its CPU can be told apart from the request path's (``python -m bench gateway``).
    """
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, 10)
    except (AttributeError, OSError):
        pass
    try:
        with open(f"/proc/self/task/{tid}/comm", "w", encoding="ascii") as comm:
            comm.write(threading.current_thread().name[:15])
    except (OSError, UnicodeEncodeError):
        pass
