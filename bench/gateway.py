"""The gateway under load, side by side: the instance directly, RouteLens (1, 2, 4 workers), LiteLLM's proxy.

Every path runs as real processes on loopback in front of the same zero-delay simulated instance
(so the figures measure the gateways, not a model), with full tracing on. The load comes from
Debian's ``wrk`` (``wrk -t1 -cC --latency``, a POST of a small chat body) at c=1 and c=16.

**Interleaved.** The instance, the bare proxy and both RouteLens gateways run at once, and the
``--seconds`` of load each path gets at each concurrency are cut into ``--rounds`` slices: every
round gives every path its c=1 and c=16 slice, one path after the other, and each path's slices are
pooled into one latency distribution (wrk's whole histogram, :mod:`bench.wrk`). This machine's
speed changes from one minute to the next (see ``machine``); run one path after the other and the
slow minute lands on one of them. The servers not under load meanwhile idle (their scrape and
store loops: a few percent of one CPU between them).

**Awake CPUs.** With ``--awake``, an idle-priority spinner keeps each CPU from halting while the
benchmark runs (:mod:`bench.awake`, the ``idle=poll`` of a latency benchmark): on this VM, waking a
halted vCPU costs up to 0.65 ms per hop at p50, and a gateway makes twice the hops of a direct
request. It helps the c=1 figures of every path and costs RouteLens's c=16 throughput here (its
threads then share the CPUs worse), so it is off by default. ``machine_asleep`` and ``machine``
are a loopback ping-pong across two CPUs and on one (:mod:`bench.loopback`) before the spinners
would start and during the runs.

**CPU.** Each figure has ``cpu_us_per_request``: the CPU time of the server's whole process tree
(the instance for ``direct``; the gateway, its workers and its store for RouteLens) over its wrk
runs, per answered request, read once the gateway has stored the slice's traces (:mod:`bench.drain`:
its pipeline writes up to ``storage.flush_interval_ms`` after the answers; read at once, that work
would land in the next path's slice). It moves less with the machine's speed than latency does.
``machine_idle_share`` and ``machine_steal_share`` are the shares of all CPUs' time, over the same
runs, that were idle and that the hypervisor gave to someone else (``/proc/stat``). Idle CPU while a
gateway is at c=16 means one of its threads is the limit, not the machine; steal is what makes this
VM slow from one minute to the next (6-20% of the time during single runs here).

**The store.** ``serve`` runs the trace store in a process of its own by default
(``storage.separate_process``): the gateway appends each trace to its spool and relays it there.
With ``--store-in-process``, one more path, ``routelens_store_in_process``, is the same gateway
keeping the store in the gateway's process (``serve --store-in-process``), measured in the same rounds.

``bare_proxy`` is the same hop through aiohttp, uvloop and RouteLens's upstream client with no
routing and no tracing (:mod:`bench.bare_proxy`): what any Python gateway pays here before doing
anything. RouteLens's own work is the difference between it and ``routelens``.

After the interleaved rounds, one more c=1 run of RouteLens (1 worker) carries a sampler beside it
(one request every 20 ms on a keep-alive connection of its own), and ``latency_over_time`` has its
p99 per second: a periodic stall shows there as a recurring spike. Each RouteLens gateway also
checks that no trace was lost: ``traces`` holds the answers it gave (warm-up and sampler
included), the traces its store holds once it has stopped, and ``lost``, answers without a trace.
LiteLLM's proxy (a pinned version) is installed by this script into a virtual environment of its
own under ``~/.cache/routelens-bench`` the first time (``--no-litellm`` skips it) and measured after
the others, the same way.

**Stage budget.** Last, one more RouteLens gateway (1 worker) with ``gateway.stage_timers: true``
runs alone at c=1 for half the ``--seconds`` (at least 5): ``routelens.stages`` gives the CPU per
request of each stage of the chat route (the event loop's own CPU: screen, analyse, admit, decide,
forward, respond, finish), of the loop outside the stages, of the gateway's storage threads
(``encode``, ``spool``, ``relay``: posting batches to the store) and of the store process's
(``store_receive``, ``store_encode``, ``store_spool``, ``store_write``), read from ``/proc`` by
thread (:mod:`bench.stage_budget`);
``routelens.stages_run`` is that run's own figures.

Last line: ``{"machine": {...}, "direct": {"c1": {"p50_ms", "p99_ms", "rps", "cpu_us_per_request"}, "c16": {...}},
"bare_proxy": {...}, "routelens": {..., "stages": {NAME: {"cpu_us_per_request"}}},
"routelens_workers": {"1": {...}, "2": {...}, "4": {...}},
"litellm": {...}, "litellm_workers": {...}, "ratio_rps_c16": ..., "ratio_rps_c16_workers": ...}`` (the ratios
compare the same number of workers).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import yaml

from app.run.procs import Child, free_port
from bench import wrk
from bench.awake import awake_cpus
from bench.drain import drained, store_url_of
from bench.loopback import ping_pong
from bench.stage_budget import stage_budget
from bench.wrk import body_script

BODY = {"model": "auto", "messages": [{"role": "user", "content": "classify: 紧急 refund failed"}], "max_tokens": 16}
LITELLM = "1.108.7"
_KEY = "sk-bench-key-not-secret"  # LiteLLM's proxy refuses to start without a master key; RouteLens ignores it


@dataclass(frozen=True)
class Target:
    """One path under load: its URL, the wrk script, the server process whose CPU is counted, and its settle.

    ``settle`` (a RouteLens gateway's: :func:`bench.drain.drained`) runs after each slice, before
    the CPU is read, so the storing of the slice's traces is counted in the slice.
    """

    url: str
    script: Path
    pid: int
    settle: Callable[[], object] | None = None


def post_script(tmp: Path, model: str = "auto") -> Path:
    """The wrk script of the benchmark's request (``model`` set), its histogram dumped for pooling."""
    return body_script(tmp, f"post-{model.replace('/', '_')}", {**BODY, "model": model},
                       {"Content-Type": "application/json", "Authorization": f"Bearer {_KEY}"})


def _sampler(url: str, stop: threading.Event, out: list[tuple[float, float]]) -> None:
    data = json.dumps(BODY).encode()
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {_KEY}"}
    t_start = time.monotonic()
    while not stop.is_set():
        t0 = time.perf_counter()
        conn.request("POST", parts.path, body=data, headers=headers)
        conn.getresponse().read()
        out.append((time.monotonic() - t_start, (time.perf_counter() - t0) * 1e3))
        stop.wait(0.02)
    conn.close()


def per_second_p99(samples: list[tuple[float, float]]) -> list[float]:
    """The p99 (ms) of the sampled requests in each second of the run."""
    by_second: dict[int, list[float]] = {}
    for t, ms in samples:
        by_second.setdefault(int(t), []).append(ms)
    return [round(sorted(v)[max(0, int(len(v) * 0.99) - 1)], 2) for _, v in sorted(by_second.items())]


def measure(paths: dict[str, Target], seconds: int, rounds: int) -> dict[str, dict[str, Any]]:
    """c=1 and c=16 against every path, interleaved: ``rounds`` slices of ``seconds / rounds`` each.

    Every path is warmed up first (2 s at c=4). In each round every path gets its c=1 slice and its
    c=16 slice, one path after the other; each path's slices are pooled into one distribution.
    ``answered`` counts every answer a path got (the warm-up included), for the lost-trace check.
    """
    slice_s = max(1.0, seconds / rounds)
    tallies = {name: {c: wrk.Tally() for c in (1, 16)} for name in paths}
    warm = {name: wrk.run(t.url, t.script, 4, 2).requests for name, t in paths.items()}
    for _ in range(rounds):
        for name, t in paths.items():
            for c in (1, 16):
                wrk.run(t.url, t.script, c, slice_s, tallies[name][c], t.pid, t.settle)
    return {name: {"c1": tallies[name][1].figures(), "c16": tallies[name][16].figures(),
                   "answered": warm[name] + tallies[name][1].requests + tallies[name][16].requests}
            for name in paths}


def over_time(target: Target, seconds: int) -> dict[str, Any]:
    """One more c=1 run with a sampler beside it (a request every 20 ms): the sampler's p99 per second."""
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sampler, args=(target.url, stop, samples), daemon=True)
    sampler.start()
    beside = wrk.run(target.url, target.script, 1, seconds, server_pid=target.pid, settle=target.settle)
    stop.set()
    sampler.join(30)
    return {"sampled_every_ms": 20, "p99_ms_per_second": per_second_p99(samples),
            "wrk_c1_beside": beside.figures(), "answered": beside.requests + len(samples)}


def stored_traces(db: Path) -> int:
    """Traces in the benchmark's DuckDB file (read once the gateway that wrote them has stopped)."""
    if not db.exists():
        return 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM traces").fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def lost_check(answered: int, stored: int) -> dict[str, int]:
    """Requests one gateway answered against the traces its store holds (a request wrk gave up on may add one)."""
    return {"answered": answered, "traces_stored": stored, "lost": max(0, answered - stored)}


def _litellm(tmp: Path, upstream: str) -> tuple[list[str], Path]:
    venv = Path.home() / ".cache" / "routelens-bench" / f"litellm-{LITELLM}"
    exe = venv / "bin" / "litellm"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"litellm[proxy]=={LITELLM}"], check=True)
    cfg = tmp / "litellm.yaml"
    cfg.write_text(yaml.safe_dump({"model_list": [{"model_name": "m", "litellm_params": {
        "model": "openai/m", "api_base": f"{upstream}/v1", "api_key": "x"}}],
        "litellm_settings": {"telemetry": False},
        "general_settings": {"master_key": "sk-bench-key-not-secret"}}))
    return [str(exe), "--config", str(cfg)], cfg


def _measure_litellm(tmp: Path, base: str, seconds: int, rounds: int, start: Any, stop_last: Any,
                     workers: int = 1) -> dict[str, Any]:
    cmd, _ = _litellm(tmp, base)
    port = free_port()
    child = start("litellm", [*cmd, "--port", str(port), "--num_workers", str(workers)], None)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        target = Target(f"http://127.0.0.1:{port}/v1/chat/completions", post_script(tmp, "m"), child.proc.pid)
        figures = measure({"litellm": target}, seconds, rounds)["litellm"]
        figures.pop("answered")
        return {"version": LITELLM, "workers": workers, **figures}
    finally:
        stop_last()


def _routelens_config(tmp: Path, name: str, port: int, base: str, *, stage_timers: bool = False) -> Path:
    cfg = {
        "gateway": {"port": port, **({"stage_timers": True} if stage_timers else {})},  # --vs trees may predate it
        "storage": {"duckdb_path": str(tmp / f"{name}.duckdb")},
        "fleet": {"instances": [{"id": "sim-0", "model": "m", "url": base}]},
        "constraints": [{"name": "queue", "metric": "queue", "op": "<=", "threshold": 1e9}],
        # The gateway alone: the prober's process (and its model's 8 s load) would share the cores with
        # the run; `python -m bench probes --gateway` measures the gateway with probes on versus off.
        "probes": {"enabled": False},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _app(tree: str | None) -> list[str]:
    """``python -m app`` of this checkout, or of ``tree``.

    ``tree`` becomes the working folder and the first on the path: the processes ``serve`` starts
    itself (``python -m app store``, workers, the prober) then run that checkout's code too.
    """
    if tree is None:
        return [sys.executable, "-m", "app"]
    code = ("import os, runpy, sys; tree = sys.argv.pop(1); os.chdir(tree); sys.path.insert(0, tree); "
            "runpy.run_module('app', run_name='__main__')")
    return [sys.executable, "-c", code, str(Path(tree).resolve())]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench gateway")
    p.add_argument("--seconds", type=int, default=10, help="load per path and concurrency, in total")
    p.add_argument("--rounds", type=int, default=5, help="interleaved slices the seconds are cut into")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="LiteLLM's workers for its N run "
                   "(compared with RouteLens at the same count)")
    p.add_argument("--worker-counts", type=lambda v: [int(x) for x in v.split(",") if x], default=[2, 4],
                   help="RouteLens worker counts measured beside 1 (default: 2,4; '': none)")
    p.add_argument("--no-litellm", action="store_true", help="skip LiteLLM's proxy")
    p.add_argument("--awake", action="store_true", help="keep idle CPUs from halting (idle-priority spinners)")
    p.add_argument("--vs", metavar="DIR", help="another checkout of RouteLens (git worktree add DIR REV), served with "
                                                "1 worker as path 'routelens_vs' in the same run: before and after")
    p.add_argument("--store-in-process", action="store_true", help="also RouteLens with 1 worker and its store in "
                   "the gateway's process (serve --store-in-process), as path 'routelens_store_in_process'")
    p.add_argument("--otel", action="store_true", help="only the gateway's CPU per request with OpenTelemetry "
                   "export on (ratio 1.0) versus off, interleaved (bench.gateway_otel)")
    args = p.parse_args(argv)
    if shutil.which("wrk") is None:
        print(json.dumps({"error": "wrk is not installed (apt-get install wrk)"}))
        return 2
    if args.otel:
        from bench.gateway_otel import main as otel_main

        return otel_main(args.seconds, args.rounds)
    tmp = Path(tempfile.mkdtemp(prefix="routelens-bench-"))
    inst = free_port()
    base = f"http://127.0.0.1:{inst}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    script = post_script(tmp)
    children: list[Child] = []
    result: dict[str, Any] = {"seconds": args.seconds, "rounds": args.rounds, "workers": args.workers,
                              "machine_asleep": ping_pong()}

    def start(name: str, argv: list[str], marker: str | None) -> Child:
        child = Child(name, argv, env, marker)
        children.append(child)
        assert child.wait_ready(120), f"{name} did not start: {child.tail()}"
        return child

    def stop_last() -> None:
        children.pop().stop()

    with awake_cpus(args.awake) as spinners:
        result["awake_spinners"] = spinners
        try:
            counts = [n for n in args.worker_counts if n > 1]
            ports = {"routelens": free_port(), **{f"routelens_w{n}": free_port() for n in counts},
                     **({"routelens_vs": free_port()} if args.vs else {}),
                     **({"routelens_store_in_process": free_port()} if args.store_in_process else {})}
            configs = {key: _routelens_config(tmp, key, port, base) for key, port in ports.items()}
            sim = start("sim", [sys.executable, "-m", "app", "--config", str(configs["routelens"]),
                                "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"],
                        "fleet ready")
            result["machine"] = ping_pong()
            floor = free_port()
            bare = start("bare-proxy", [sys.executable, "-m", "bench.bare_proxy", "--port", str(floor),
                                        "--upstream", f"{base}/v1/chat/completions"], "bare proxy ready")
            paths = {"direct": Target(f"{base}/v1/chat/completions", script, sim.proc.pid),
                     "bare_proxy": Target(f"http://127.0.0.1:{floor}/v1/chat/completions", script, bare.proc.pid)}
            dbs: dict[str, Path] = {}
            gateways = (("routelens", 1), *((f"routelens_w{n}", n) for n in counts),
                        *((("routelens_vs", 1),) if args.vs else ()),
                        *((("routelens_store_in_process", 1),) if args.store_in_process else ()))
            for key, n in gateways:
                gw = ports[key]
                dbs[key] = tmp / f"{key}.duckdb"
                serve = ["--config", str(configs[key]), "serve", "--port", str(gw), "--workers", str(n),
                         *(["--store-in-process"] if key == "routelens_store_in_process" else [])]
                child = start(key, [*_app(args.vs if key == "routelens_vs" else None), *serve], "gateway ready")
                paths[key] = Target(f"http://127.0.0.1:{gw}/v1/chat/completions", script, child.proc.pid,
                                    drained(f"http://127.0.0.1:{gw}/metrics", confirm=2 * n,
                                            store_url=store_url_of(child.tail())))
            result.update(measure(paths, args.seconds, args.rounds))
            for key in ("direct", "bare_proxy"):
                result[key].pop("answered")
            sampled = over_time(paths["routelens"], args.seconds)
            result["routelens"]["answered"] += sampled.pop("answered")
            result["routelens"]["latency_over_time"] = sampled
            # The stage budget: one more gateway, its stage timers on, alone at c=1 (bench.stage_budget).
            sp = free_port()
            cfg = _routelens_config(tmp, "routelens_stages", sp, base, stage_timers=True)
            timed = start("routelens_stages", [*_app(None), "--config", str(cfg), "serve", "--port", str(sp),
                                               "--workers", "1"], "gateway ready")
            wrk.run(f"http://127.0.0.1:{sp}/v1/chat/completions", script, 4, 2)  # warm-up
            budget = stage_budget(f"http://127.0.0.1:{sp}/v1/chat/completions", script, timed.proc.pid,
                                  f"http://127.0.0.1:{sp}/metrics", max(5.0, args.seconds / 2),
                                  settle=drained(f"http://127.0.0.1:{sp}/metrics",
                                                 store_url=store_url_of(timed.tail())))
            result["routelens"]["stages"] = budget["stages"]
            result["routelens"]["stages_run"] = {"c1": budget["c1"],
                                                 "process_cpu_us_per_request": budget["process_cpu_us_per_request"]}
            stop_last()
            while len(children) > 2:  # the gateways store what they hold before they exit
                stop_last()
            for key, _ in gateways:
                result[key]["traces"] = lost_check(result[key].pop("answered"), stored_traces(dbs[key]))
            result["routelens_workers"] = {  # the same gateway at 1, 2, 4... workers (in the same rounds)
                "1": {k: result["routelens"][k] for k in ("c1", "c16", "traces")},
                **{str(n): result.pop(f"routelens_w{n}") for n in counts}}
            stop_last()  # the bare proxy
            if not args.no_litellm:
                for key, n in (("litellm", 1), ("litellm_workers", args.workers)):
                    try:
                        result[key] = _measure_litellm(tmp, base, args.seconds, args.rounds, start, stop_last, n)
                    except (OSError, subprocess.SubprocessError, AssertionError, RuntimeError) as exc:
                        result[key] = {"version": LITELLM, "workers": n, "error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            while children:
                stop_last()
    same = result.get("routelens_workers", {}).get(str(args.workers), {})
    for ours, theirs, key in ((result.get("routelens", {}), "litellm", "ratio_rps_c16"),
                              (same, "litellm_workers", "ratio_rps_c16_workers")):
        if "c16" in result.get(theirs, {}) and "c16" in ours:  # the same number of workers on both sides
            result[key] = round(ours["c16"]["rps"] / max(result[theirs]["c16"]["rps"], 1e-9), 1)
    print(json.dumps(result))
    return 0
