"""``python -m bench.replay_big``: ``replay --verify`` over the traces of a big fleet, trace by trace and in bulk.

The traces are a real gateway's: ``routelens sim fleet`` serves ``--instances`` instances of the
built-in mix (default 200: 50 of each of 4 models) in one process, ``routelens serve --workers 1``
routes ``--requests`` requests to them (``model: auto``, so every instance is a candidate; a
share name a model, a share carry a session), the store writes them with their policy. The file
is cached under ``~/.cache/routelens-bench`` (``--db`` names another).

Then, in this process, the window is verified trace by trace as before (the newest ``--per-trace``
traces each read with the store's ``get``: what ``--api`` still does, and ``--db`` did), and in bulk
(:func:`app.experiments.verify.verify_file`, every trace, in one process and in two). Every path must
reproduce every decision. Prints one JSON line last: each path's traces/s, CPU ms a trace, the
milliseconds between two traces' verdicts (p50, p95, p99, max) and the speed-ups.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import yaml

CACHE = Path.home() / ".cache" / "routelens-bench"
PROMPTS = ("hello, what is the weather like today?", "write a python function that adds two numbers",
           "summarise the attached contract's termination clause", "what is 17 * 23?")
MODELS = ("deepseek-coder-6b-int4", "default-7b-chat")


def generate(path: Path, instances: int, requests: int, concurrency: int = 4) -> None:
    """Run a fleet of ``instances`` and one gateway, send ``requests`` requests, leave their traces in ``path``."""
    import requests as http  # `requests` here is the count

    from app.run.procs import Child, free_ports, wait_http
    from sim.behaviour import builtin_config

    folder = path.parent / (path.stem + ".run")
    folder.mkdir(parents=True, exist_ok=True)
    *ports, gw = free_ports(instances + 1)
    base = builtin_config(instances, 0, zero_delay=True)
    specs = [s.model_copy(update={"url": f"http://127.0.0.1:{p}"}) for s, p in zip(base.fleet.instances, ports,
                                                                                      strict=True)]
    cfg = base.model_dump(mode="json")
    cfg.update({"fleet": {"instances": [s.model_dump(mode="json") for s in specs]},
                "gateway": {"host": "127.0.0.1", "port": gw}, "probes": {"enabled": False},
                "storage": {"duckdb_path": str(path), "flush_interval_ms": 50},
                "scoring": {"preset": "balanced"}, "economics": {"affinity": {"header": "x-session"}}})
    config = folder / "routelens.yaml"
    config.write_text(yaml.safe_dump(cfg))
    py = [sys.executable, "-m", "app", "--config", str(config)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    children: list[Child] = []
    try:
        fleet = Child("sim", [*py, "sim", "fleet"], env, "fleet ready")
        children.append(fleet)
        if not fleet.wait_ready(120):
            raise SystemExit(f"the fleet did not start:\n{fleet.tail()}")
        serve = Child("gateway", [*py, "serve", "--workers", "1"], env, "gateway ready")
        children.append(serve)
        url = f"http://127.0.0.1:{gw}"
        if not (serve.wait_ready(120) and wait_http(f"{url}/health", 30, serve.alive)):
            raise SystemExit(f"the gateway did not start:\n{serve.tail()}")
        time.sleep(3)  # a scrape round or two: routing on real state

        def one(i: int) -> int:
            model = MODELS[i % len(MODELS)] if i % 5 == 4 else "auto"
            headers = {"x-session": f"s{i % 11}"} if i % 4 == 1 else {}
            body = json.dumps({"model": model, "max_tokens": 8,
                               "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]})
            return http.post(f"{url}/v1/chat/completions", data=body, timeout=60,
                             headers={**headers, "Content-Type": "application/json"}).status_code

        with ThreadPoolExecutor(concurrency) as pool:
            codes = list(pool.map(one, range(requests)))
        print(f"  sent {requests:,}: {sum(c == 200 for c in codes):,} answered 200", file=sys.stderr, flush=True)
        time.sleep(3)  # the last traces reach the store
    finally:
        for child in reversed(children):
            child.stop(30)


def window(path: Path) -> tuple[datetime, datetime, int]:
    """The file's traces: first ts, just after the last, how many."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        row = con.execute("SELECT min(ts), max(ts), count(*) FROM traces").fetchone()
    finally:
        con.close()
    assert row is not None and row[2], f"{path} holds no traces"
    return row[0].astimezone(UTC), row[1].astimezone(UTC) + timedelta(microseconds=1), int(row[2])


def _tails(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {}
    ordered = sorted(ms)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"p50": round(statistics.median(ordered), 2), "p95": at(0.95), "p99": at(0.99),
            "max": round(ordered[-1], 2)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.replay_big")
    p.add_argument("--instances", type=int, default=200)
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--per-trace", type=int, default=200, help="traces verified trace by trace (the old path)")
    p.add_argument("--db", help="the generated file (default: cached under ~/.cache/routelens-bench)")
    args = p.parse_args(argv)
    path = Path(args.db) if args.db else CACHE / f"big-{args.instances}-{args.requests}.duckdb"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        print(f"generating {args.requests:,} traces over {args.instances} instances in {path} ...", file=sys.stderr,
              flush=True)
        generate(path, args.instances, args.requests)
    since, until, n = window(path)
    out: dict[str, Any] = {"instances": args.instances, "traces": n}
    out.update(measure(path, since, until, args.per_trace))
    print(json.dumps(out))
    ok = out["bulk"]["mismatched"] == 0 and out["per_trace"]["mismatched"] == 0
    return 0 if ok and out["bulk"]["two_processes_same_report"] else 1


def measure(path: Path, since: datetime, until: datetime, per_trace: int) -> dict[str, Any]:
    """Verify the window both ways: each path's rate, CPU per trace and per-trace tails.

    ``per_trace`` is the old path (``--db`` before this bench, ``--api`` still): the newest
    ``per_trace`` traces each read with the store's ``get`` and verified (the code of
    ``verify_range`` before it tuned the collector). ``bulk`` times the time between two traces'
    verdicts as the file is read in batches (a batch's first trace waits for its read: the tails),
    then :func:`app.experiments.verify.verify_file` as the command runs it, in one process and in
    two (CPU: this process's only; with two, the wall-clock rate on this machine's shared cores).
    """
    from app.experiments import bulk, stored_traces, verify
    from app.experiments._collector import fewer_collections
    from app.experiments.rows import SAMPLED_OUT
    from ingest import DuckDBTraceStore
    from schemas.queries import TraceFilter

    flt = TraceFilter(start=since, end=until)
    store = DuckDBTraceStore(path, read_only=True)
    try:
        ids = [i.request_id for i in store.search(flt, limit=max(per_trace, 1)).items][:per_trace]
        shelf = verify.PolicyShelf(store.policy)
        old_ms, old_bad, cpu = [], 0, time.process_time()
        for rid in ids:
            t = time.perf_counter()
            trace = store.get(rid)
            got = SAMPLED_OUT if trace is None else verify.verify_trace(trace, shelf)
            old_ms.append((time.perf_counter() - t) * 1e3)
            old_bad += got is not None and not isinstance(got, str)
        old_cpu = time.process_time() - cpu
    finally:
        store.close()
    con = bulk.open_file(path)
    store = DuckDBTraceStore(path, read_only=True)
    try:
        shelf = verify.PolicyShelf(store.policy)
        new_ms, t = [], time.perf_counter()
        with fewer_collections():  # as verify_file runs
            for batch in stored_traces.read_traces(con, flt):
                for item in batch:
                    if item.trace is not None:
                        verify.verify_trace(item.trace, shelf)
                    now = time.perf_counter()
                    new_ms.append((now - t) * 1e3)
                    t = now
    finally:
        store.close()
        con.close()
    cpu = time.process_time()
    one = verify.verify_file(path, since, until, workers=1)
    one_cpu = time.process_time() - cpu
    two = verify.verify_file(path, since, until, workers=2)
    old_rate = len(old_ms) / (sum(old_ms) / 1e3) if old_ms else 0.0
    return {
        "per_trace": {"traces": len(old_ms), "mismatched": old_bad, "traces_per_s": round(old_rate, 1),
                      "cpu_ms_per_trace": round(old_cpu / max(len(old_ms), 1) * 1e3, 2),
                      "ms_per_trace": _tails(old_ms)},
        "bulk": {"traces": one.n, "reproduced": one.reproduced, "mismatched": one.mismatched,
                 "not_replayable": one.not_replayable, "traces_per_s": round(one.n / one.elapsed_s, 1),
                 "cpu_ms_per_trace": round(one_cpu / max(one.n, 1) * 1e3, 2), "ms_per_trace": _tails(new_ms),
                 "two_processes_traces_per_s": round(two.n / two.elapsed_s, 1),
                 "two_processes_same_report": two.model_dump(exclude={"elapsed_s"}) ==
                 one.model_dump(exclude={"elapsed_s"})},
        "speedup": round(one.n / one.elapsed_s / old_rate, 1) if old_rate else None,
        "cpu_speedup": round(old_cpu / len(old_ms) / (one_cpu / one.n), 1) if old_ms and one_cpu else None,
    }


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
