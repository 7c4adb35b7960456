"""The children of ``serve`` that are started again when they die: the store, the workers, the prober, the Redis.

A child that crashes (an OOM kill, ``kill -9``) and stays dead leaves ``serve`` running without
it: a dead store stores nothing while the gateway spools for ever, a dead worker halves the
capacity behind the port, a dead prober freezes every verdict at its last value, a dead local Redis
leaves the workers on local state (each its own limits). A :class:`Supervised` child is started
again after a pause (1 s, doubling to 30 s while it keeps dying within a minute), with the same
command line (the same port or socket: the gateway's relay reaches the store again and delivers
what its spool held; a worker replays its own spool; the workers reconnect to the Redis), and
``serve`` says so on stderr. :meth:`Supervised.stop` ends the watch first, so a child stopped on
purpose is not started again. Nor is one that refused its configuration before it was ready (exit
code 2: a variable a setting names unset, say): the same command line would be refused again.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from app.run.procs import Child

__all__ = ["CONFIG_REFUSED", "Supervised", "next_pause"]

CONFIG_REFUSED = 2  # the exit code of a command that refused its configuration or arguments (app.cli)

_FIRST_PAUSE_S, _LONGEST_PAUSE_S, _STEADY_S = 1.0, 30.0, 60.0


def next_pause(previous: float, lived_s: float) -> float:
    """The pause before starting a child again: 1 s, doubling up to 30 s while each lived under a minute."""
    if not previous or lived_s > _STEADY_S:
        return _FIRST_PAUSE_S
    return min(previous * 2, _LONGEST_PAUSE_S)


class Supervised:
    """``start()``'s child, started again whenever it exits until :meth:`stop`.

    Args:
        name: Names the child in what is said.
        start: Starts the child and returns it (without waiting for its ready line).
        clock: Monotonic clock (injected), for how long a child lived.
        child: The first child, already started and ready (None: ``start()`` now). A caller that
            must see the first start succeed (and give up, not retry, when it does not) starts it.
    """

    def __init__(self, name: str, start: Callable[[], Child], *,
                 clock: Callable[[], float] = time.monotonic, child: Child | None = None) -> None:
        self.name = name
        self.restarts = 0
        self._start = start
        self._clock = clock
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.child = child if child is not None else start()
        self._watcher = threading.Thread(target=self._watch, name=f"supervise-{name}", daemon=True)
        self._watcher.start()

    @property
    def watching(self) -> bool:
        """Whether a child that exits would be started again (until :meth:`stop`)."""
        return self._watcher.is_alive()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait for the current child's ready line; False on timeout or exit."""
        return self.child.wait_ready(timeout_s)

    def stop(self) -> None:
        """End the watch, then the child; once this returns, no child is started again."""
        with self._lock:
            self._stopping.set()
            child = self.child
        child.stop()
        self._watcher.join(15)  # it returns once it sees the exit (or stops a child it was starting)

    def _watch(self) -> None:
        pause = 0.0
        while True:
            born = self._clock()
            code = self.child.proc.wait()
            if self._stopping.is_set():
                return
            self.child.wait_ready(1.0)  # its output read to the end: was_ready is final
            if code == CONFIG_REFUSED and not self.child.was_ready:  # its configuration: starting again won't help
                print(f"warning: the {self.name} process refused its configuration (code {code}); not started again",
                      file=sys.stderr, flush=True)
                return
            pause = next_pause(pause, self._clock() - born)
            print(f"warning: the {self.name} process exited (code {code}); starting it again in {pause:g} s",
                  file=sys.stderr, flush=True)
            if self._stopping.wait(pause):
                return
            try:
                child = self._start()
            except OSError as exc:  # no process to be had now (file descriptors, memory): the next pause, again
                print(f"warning: the {self.name} process could not be started: {exc}", file=sys.stderr, flush=True)
                continue
            with self._lock:
                late = self._stopping.is_set()
                if not late:
                    self.child = child
                    self.restarts += 1
            if late:  # stop() came while it started
                child.stop()
                return
