"""Keep every CPU out of its idle state while a latency benchmark runs: one SCHED_IDLE spinner per CPU.

On this VM an idle vCPU halts, and waking a process on it takes the host's time: a loopback
ping-pong across vCPUs moves between about 50 µs and 650 µs at p50 from one minute to the next
(:mod:`bench.loopback`), while on one vCPU it stays near 14 µs. A request through a gateway crosses
processes twice as often as one sent to the instance directly, so the gateway's figures move with
the machine's mood more than with the gateway's work.

A spinner under ``SCHED_IDLE`` runs only when its CPU has nothing else to run, and any other task
that wakes takes the CPU from it at once: the CPUs never halt, and the measured processes lose
nothing to the spinners (``SCHED_IDLE``'s weight is 3 against a normal task's 1024). This is the
``idle=poll`` setting of a latency benchmark, for every path of the benchmark alike.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from app.run.procs import die_with_parent

__all__ = ["awake_cpus"]

_SPIN = (
    "import os, sys\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
    "while True:\n"
    "    pass\n"
)


@contextmanager
def awake_cpus(enabled: bool = True) -> Iterator[int]:
    """Run one idle-priority spinner on each CPU this process may use; yield how many run (0: off)."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if enabled:
            for cpu in sorted(os.sched_getaffinity(0)):
                procs.append(subprocess.Popen([sys.executable, "-c", _SPIN, str(cpu)],
                                              preexec_fn=die_with_parent(signal.SIGKILL)))
        yield len(procs)
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
