"""A child of ``serve`` that is started again when it dies: the store process.

With the trace store in a process of its own (``serve``'s default), a store that crashes (an OOM
kill, ``kill -9``) would leave the gateway answering and spooling for ever with nothing stored. A
:class:`Supervised` child is started again after a pause (1 s, doubling to 30 s while it keeps
dying within a minute), with the same command line (the same port: the gateway's relay reaches
it again and delivers what its spool held), and says so on stderr. :meth:`Supervised.stop` ends
the watch first, so a child stopped on purpose is not started again.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from app.run.procs import Child

__all__ = ["Supervised"]

_FIRST_PAUSE_S, _LONGEST_PAUSE_S, _STEADY_S = 1.0, 30.0, 60.0


class Supervised:
    """``start()``'s child, started again whenever it exits until :meth:`stop`.

    Args:
        name: Names the child in what is said.
        start: Starts the child and returns it (without waiting for its ready line).
        clock: Monotonic clock (injected), for how long a child lived.
    """

    def __init__(self, name: str, start: Callable[[], Child], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.restarts = 0
        self._start = start
        self._clock = clock
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.child = start()
        threading.Thread(target=self._watch, name=f"supervise-{name}", daemon=True).start()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait for the current child's ready line; False on timeout or exit."""
        return self.child.wait_ready(timeout_s)

    def stop(self) -> None:
        """End the watch, then the child."""
        with self._lock:
            self._stopping.set()
            child = self.child
        child.stop()

    def _watch(self) -> None:
        pause = _FIRST_PAUSE_S
        while True:
            born = self._clock()
            code = self.child.proc.wait()
            if self._stopping.is_set():
                return
            pause = _FIRST_PAUSE_S if self._clock() - born > _STEADY_S else min(pause * 2, _LONGEST_PAUSE_S)
            print(f"warning: the {self.name} process exited (code {code}); starting it again in {pause:g} s",
                  file=sys.stderr, flush=True)
            if self._stopping.wait(pause):
                return
            child = self._start()
            with self._lock:
                late = self._stopping.is_set()
                if not late:
                    self.child = child
                    self.restarts += 1
            if late:  # stop() came while it started
                child.stop()
                return
