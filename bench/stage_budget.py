"""The stage budget: where one RouteLens request's CPU goes, measured one request at a time.

A gateway with ``gateway.stage_timers: true`` (off in production) counts its event loop's CPU time
in each stage of the chat route (``routelens_gateway_stage_cpu_seconds``: screen, analyse with the
policy, admit, decide, forward, respond, finish with the recorder and the spool append). The other
threads of its process are read from ``/proc`` by the names they give the system
(:func:`ingest.pipeline.batcher.lower_priority`): ``trace-preparer`` (decoding and validating the
spooled records into Arrow), ``trace-writer`` and DuckDB's own threads (the store's write),
``spool-keeper`` (prefaulting and fsync). A c=1 run of ``seconds`` gives each its CPU per request;
``event_loop_outside_stages`` is the loop's CPU the stages do not cover (aiohttp parsing the
request and writing the answer, the scrape loop).

With the store in a process of its own (``serve``'s default), the gateway's ``trace-writer`` posts
batches to it (``relay``) and the store process's threads are read the same way: its event loop
taking the batches in (``store_receive``), and its own ``store_encode``, ``store_spool`` and
``store_write``. With the store in the gateway's process, ``store_write`` is the gateway's writer.
"""

from __future__ import annotations

import os
import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.run.procs import descendant_running
from bench import wrk

__all__ = ["THREADS", "stage_budget", "stage_cpu", "thread_cpu"]

# system thread name -> what it does for a request (threads without a name of ours: DuckDB's, executors)
THREADS = {"trace-preparer": "encode", "trace-writer": "store_write", "spool-keeper": "spool",
           "trace-export-otel"[:15]: "otel_export"}  # the OTLP exporter's thread (system names: 15 characters)
_TICK = os.sysconf("SC_CLK_TCK")
_LINE = re.compile(r'^routelens_gateway_stage_cpu_seconds_(sum|count)\{stage="(\w+)"\} (\S+)$', re.M)


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of ``pid``'s threads so far by role: ``event_loop`` (the main thread), :data:`THREADS`, ``other``."""
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        role = "event_loop" if int(tid) == pid else THREADS.get(name, "other")
        out[role] = out.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / _TICK
    return out


def store_pid(pid: int) -> int | None:
    """The ``routelens store`` process that the ``serve`` at ``pid`` started (None: it keeps the store itself)."""
    return descendant_running(pid, lambda argv: b"store" in argv and b"serve" not in argv)


def stage_cpu(metrics_url: str) -> dict[str, list[float]]:
    """``{stage: [CPU seconds, count]}`` from a gateway's ``/metrics``."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    out: dict[str, list[float]] = {}
    for kind, stage, value in _LINE.findall(text):
        out.setdefault(stage, [0.0, 0.0])[0 if kind == "sum" else 1] = float(value)
    return out


def stage_budget(url: str, script: Path, pid: int, metrics_url: str, seconds: float,
                 settle: Callable[[], object] | None = None) -> dict[str, Any]:
    """A c=1 run against a gateway with stage timers on: CPU per request of each stage and each thread role.

    ``settle`` waits for the run's traces to be stored before the threads' CPU is read (:mod:`bench.drain`).
    """
    store = store_pid(pid)

    def store_cpu() -> dict[str, float]:
        return {} if store is None else thread_cpu(store)

    stages0, threads0, store0 = stage_cpu(metrics_url), thread_cpu(pid), store_cpu()
    tally = wrk.Tally()
    wrk.run(url, script, 1, seconds, tally, pid, settle)
    stages1, threads1, store1 = stage_cpu(metrics_url), thread_cpu(pid), store_cpu()
    n = max(tally.requests, 1)

    def per_request(seconds_: float) -> dict[str, float]:
        return {"cpu_us_per_request": round(seconds_ / n * 1e6, 1)}

    stages = {s: per_request(v[0] - stages0.get(s, [0.0, 0.0])[0]) for s, v in stages1.items()}
    spent = {role: threads1.get(role, 0.0) - threads0.get(role, 0.0) for role in threads1}
    in_stages = sum(v[0] - stages0.get(s, [0.0, 0.0])[0] for s, v in stages1.items())
    in_store = {role: store1.get(role, 0.0) - store0.get(role, 0.0) for role in store1}
    writer = "store_write" if store is None else "relay"  # the gateway's trace-writer: DuckDB, or the post
    roles = {"event_loop_outside_stages": per_request(spent.get("event_loop", 0.0) - in_stages),
             "encode": per_request(spent.get("encode", 0.0)), "spool": per_request(spent.get("spool", 0.0)),
             writer: per_request(spent.get("store_write", 0.0) + spent.get("other", 0.0))}
    if store is not None:
        roles |= {"store_receive": per_request(in_store.get("event_loop", 0.0)),
                  "store_encode": per_request(in_store.get("encode", 0.0)),
                  "store_spool": per_request(in_store.get("spool", 0.0)),
                  "store_write": per_request(in_store.get("store_write", 0.0) + in_store.get("other", 0.0))}
    return {"stages": {**stages, **roles}, "c1": tally.figures(),
            "process_cpu_us_per_request": round((sum(spent.values()) + sum(in_store.values())) / n * 1e6, 1)}
