"""The gateway benchmark's load parts: pooled wrk histograms, the CPU of a process tree, the idle spinners."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from app.run.procs import free_port
from bench import wrk
from bench.awake import awake_cpus
from tests.polling import wait_until


def test_pooled_percentiles_count_every_request_of_every_run() -> None:
    tally = wrk.Tally(hist=Counter({100: 50, 200: 49}), requests=99, seconds=1.0)
    tally.hist[5000] += 1  # a second run's one slow request
    tally.requests, tally.seconds, tally.cpu_s = 100, 2.0, 0.05
    tally.machine.update({"total": 400, "idle": 100, "steal": 20})
    assert (tally.percentile_ms(0.5), tally.percentile_ms(0.99), tally.percentile_ms(1.0)) == (0.1, 0.2, 5.0)
    assert tally.figures() == {"p50_ms": 0.1, "p99_ms": 0.2, "requests": 100, "rps": 50.0, "non_2xx": 0,
                               "cpu_us_per_request": 500.0, "machine_idle_share": 0.25, "machine_steal_share": 0.05}
    with pytest.raises(RuntimeError, match="no latency"):
        wrk.Tally().percentile_ms(0.5)


@pytest.fixture
def server() -> Iterator[str]:
    """A real HTTP server on loopback answering 200, or 500 to a body asking for it."""
    async def answer(request: web.Request) -> web.Response:
        return web.json_response({}, status=500 if b"fail" in await request.read() else 200)

    port, ready, stop = free_port(), threading.Event(), threading.Event()

    def serve() -> None:
        async def main() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", answer)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)
            await runner.cleanup()
        asyncio.run(main())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield f"http://127.0.0.1:{port}/v1/chat/completions"
    stop.set()
    thread.join(10)


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (make test installs it)")
def test_two_wrk_runs_pool_into_one_histogram(server: str, tmp_path: Path) -> None:
    ok = wrk.body_script(tmp_path, "ok", {"model": "m", "note": "it's"}, {"Content-Type": "application/json"})
    fail = wrk.body_script(tmp_path, "fail", {"model": "fail"}, {"Content-Type": "application/json"})
    tally = wrk.run(server, ok, 1, 1)
    first = tally.requests
    wrk.run(server, fail, 2, 1, tally, server_pid=os.getpid())
    assert first > 0 and tally.requests > first and tally.non_2xx == tally.requests - first
    # wrk's histogram is the one its own percentiles come from: every answer, plus the samples its
    # coordinated-omission correction adds for answers slower than the run's mean interval
    assert sum(tally.hist.values()) >= tally.requests
    assert tally.seconds > 0 and tally.cpu_s > 0  # the server runs in this process
    assert tally.machine["total"] > 0  # the machine's CPU time over both runs
    assert 0 <= tally.figures()["machine_idle_share"] <= 1


def test_the_machines_cpu_states_come_from_proc_stat() -> None:
    # the first line of a real /proc/stat (this VM): user nice system idle iowait irq softirq steal guest guest_nice
    stat = ("cpu  5559035 191670 705777 5977922 120424 0 56539 786968 0 0\n"
            "cpu0 2779517 95835 352888 2988961 0 0 0 0 0 0\n")
    times = wrk.machine_times(stat)
    assert times == Counter({"total": 13398335, "idle": 6098346, "steal": 786968})


# wrk 4.1's summary of a run (Debian's package), cut to the lines summary() reads and their neighbours
_OUT = """Running 2s test @ http://127.0.0.1:1/v1/chat/completions
  1 threads and 2 connections
  3831 requests in 2.00s, 2.07MB read
  Non-2xx or 3xx responses: 1447
Requests/sec:   1913.58
"""


def test_wrks_summary_gives_requests_duration_and_failures() -> None:
    assert wrk.summary(_OUT) == (3831, 2.0, 1447)
    assert wrk.summary(_OUT.replace("2.00s", "1.50m").replace("  Non-2xx or 3xx responses: 1447\n", "")) == (
        3831, 90.0, 0)
    with pytest.raises(RuntimeError, match="measured nothing"):
        wrk.summary("unable to connect to 127.0.0.1:1 Connection refused", "http://127.0.0.1:1")


def test_a_process_trees_cpu_counts_its_descendants() -> None:
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(30)\n"
    parent = subprocess.Popen(["sh", "-c", f'{sys.executable} -c "$0"; :', busy])
    try:
        time.sleep(0.1)
        deadline = time.monotonic() + 20
        while wrk.tree_cpu_s(parent.pid) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0.3 <= wrk.tree_cpu_s(parent.pid) < 1.0  # the grandchild's CPU; the shell's own is near 0
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)], check=False)
        parent.kill()
        parent.wait()
    assert wrk.tree_cpu_s(parent.pid) == 0.0  # gone


def test_the_spinners_run_at_idle_priority_one_per_cpu_and_end_with_the_block() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    with awake_cpus() as n:
        assert n == len(cpus)
        kids = [int(p) for p in subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "SCHED_IDLE"],
                                               capture_output=True, text=True).stdout.split()]
        assert len(kids) == n

        def settled() -> bool:  # each spinner sets its own policy and CPU once it has started
            return all(os.sched_getscheduler(pid) == os.SCHED_IDLE for pid in kids) and sorted(
                cpu for pid in kids for cpu in os.sched_getaffinity(pid)) == cpus

        assert wait_until(settled, 30, 0.05)
    assert not any(Path(f"/proc/{pid}").exists() for pid in kids)
    with awake_cpus(enabled=False) as off:
        assert off == 0
