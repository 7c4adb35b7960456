"""The gateway under load, side by side: the instance directly, RouteLens (1 and N workers), LiteLLM's proxy.

Every path runs as real processes on loopback in front of the same zero-delay simulated instance
(so the figures measure the gateways, not a model), with full tracing on. The load comes from
Debian's ``wrk`` (``wrk -t1 -cC -dDs --latency``, a POST of a small chat body) at c=1 and c=16, the
same runs on every path.
LiteLLM's proxy (a pinned version) is installed by this script into a virtual environment of its
own under ``~/.cache/routelens-bench`` the first time (``--no-litellm`` skips it). After RouteLens's
measured runs, one more c=1 run carries a sampler beside it (one request every 20 ms on a
keep-alive connection of its own) and the output has its p99 per second (``latency_over_time``): a
periodic stall shows there as a recurring spike. It is a run of its own because the sampler's
requests land between wrk's: in the measured c=1 run they would queue behind each other, which the
direct path (measured without a sampler) does not see.

Each RouteLens run also checks that no trace was lost: ``traces`` holds the answers its runs got
(warm-up and sampler included), the traces its store holds once the gateway has stopped, and
``lost``, the answers without a trace.

Two figures read the others against the machine: ``machine`` is a loopback ping-pong across two
CPUs and on one (:mod:`bench.loopback`: what one wake-up between processes costs here), and
``bare_proxy`` is the same hop through aiohttp, uvloop and RouteLens's upstream client with no
routing and no tracing (:mod:`bench.bare_proxy`): what any Python gateway pays here before doing
anything. RouteLens's own work is the difference between it and ``routelens``.

Last line: ``{"machine": {...}, "direct": {"c1": {"p50_ms", "p99_ms", "rps"}, "c16": {...}}, "routelens": {...},
"routelens_workers": {...}, "litellm": {...}, "litellm_workers": {...}, "ratio_rps_c16": ...,
"ratio_rps_c16_workers": ...}`` (the ratios compare the same number of workers).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import yaml

from app.run.procs import Child, free_port
from bench.loopback import ping_pong

BODY = {"model": "auto", "messages": [{"role": "user", "content": "classify: 紧急 refund failed"}], "max_tokens": 16}
LITELLM = "1.108.7"
_KEY = "sk-bench-key-not-secret"  # LiteLLM's proxy refuses to start without a master key; RouteLens ignores it
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _wrk_script(tmp: Path, model: str = "auto") -> Path:
    body = json.dumps({**BODY, "model": model}, ensure_ascii=False).replace("\\", "\\\\").replace("'", "\\'")
    path = tmp / f"post-{model.replace('/', '_')}.lua"
    path.write_text(f"wrk.method = 'POST'\nwrk.body = '{body}'\nwrk.headers['Content-Type'] = 'application/json'\n"
                    f"wrk.headers['Authorization'] = 'Bearer {_KEY}'\n", encoding="utf-8")
    return path


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip()).groups()  # type: ignore[union-attr]
    return float(value) * _UNITS[unit]


def wrk(url: str, script: Path, connections: int, seconds: int) -> dict[str, float]:
    """One wrk run: p50/p99 latency (ms), requests answered, requests/s, and non-2xx responses."""
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "--latency", "-s", str(script), url]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    pct = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M))
    if "50" not in pct or "99" not in pct:  # no request completed: say so instead of a KeyError
        raise RuntimeError(f"wrk measured no latency against {url}: {' '.join(out.split())[-300:]}")
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    done = re.search(r"(\d+) requests in", out)
    return {"p50_ms": round(_ms(pct["50"]), 3), "p99_ms": round(_ms(pct["99"]), 3),
            "requests": int(done.group(1)) if done else 0,
            "rps": round(float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), 1),  # type: ignore[union-attr]
            "non_2xx": int(errors.group(1)) if errors else 0}


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


def measure(url: str, script: Path, seconds: int, *, over_time: bool = False) -> dict[str, Any]:
    """c=1 and c=16 against ``url`` (after a short warm-up); then, if asked, the sampled c=1 run.

    ``answered`` counts every answer the runs got (warm-up and sampler included), for the
    lost-trace check.
    """
    warm = wrk(url, script, 4, 2)
    result: dict[str, Any] = {"c1": wrk(url, script, 1, seconds), "c16": wrk(url, script, 16, seconds)}
    answered = warm["requests"] + result["c1"]["requests"] + result["c16"]["requests"]
    if over_time:
        samples: list[tuple[float, float]] = []
        stop = threading.Event()
        sampler = threading.Thread(target=_sampler, args=(url, stop, samples), daemon=True)
        sampler.start()
        beside = wrk(url, script, 1, seconds)
        stop.set()
        sampler.join(30)
        result["latency_over_time"] = {"sampled_every_ms": 20, "p99_ms_per_second": per_second_p99(samples),
                                       "wrk_c1_beside": beside}
        answered += beside["requests"] + len(samples)
    result["answered"] = answered
    return result


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


def lost_check(answered: int, before: int, after: int) -> dict[str, int]:
    """Requests answered against traces stored by one gateway run (a request wrk gave up on may add one)."""
    stored = after - before
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


def _measure_litellm(tmp: Path, base: str, seconds: int, start: Any, stop_last: Any,
                     workers: int = 1) -> dict[str, Any]:
    cmd, _ = _litellm(tmp, base)
    port = free_port()
    start("litellm", [*cmd, "--port", str(port), "--num_workers", str(workers)], None)
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
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        figures = measure(url, _wrk_script(tmp, "m"), seconds)
        figures.pop("answered")
        return {"version": LITELLM, "workers": workers, **figures}
    finally:
        stop_last()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench gateway")
    p.add_argument("--seconds", type=int, default=10, help="duration of each wrk run")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="RouteLens workers for the N run")
    p.add_argument("--no-litellm", action="store_true", help="skip LiteLLM's proxy")
    args = p.parse_args(argv)
    if shutil.which("wrk") is None:
        print(json.dumps({"error": "wrk is not installed (apt-get install wrk)"}))
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="routelens-bench-"))
    inst, gw = free_port(), free_port()
    base = f"http://127.0.0.1:{inst}"
    cfg = {
        "gateway": {"port": gw},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb")},
        "fleet": {"instances": [{"id": "sim-0", "model": "m", "url": base}]},
        "constraints": [{"name": "queue", "metric": "queue", "op": "<=", "threshold": 1e9}],
        # The gateway alone: the prober's process (and its model's 8 s load) would share the cores with
        # the run; `python -m bench probes --gateway` measures the gateway with probes on versus off.
        "probes": {"enabled": False},
    }
    (tmp / "c.yaml").write_text(yaml.safe_dump(cfg))
    py = [sys.executable, "-m", "app", "--config", str(tmp / "c.yaml")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    script = _wrk_script(tmp)
    children: list[Child] = []
    result: dict[str, Any] = {"seconds": args.seconds, "workers": args.workers}

    def start(name: str, argv: list[str], marker: str | None, wait_url: str | None = None) -> Child:
        child = Child(name, argv, env, marker)
        children.append(child)
        assert child.wait_ready(120), f"{name} did not start"
        return child

    def stop_last() -> None:
        children.pop().stop()

    try:
        start("sim", [*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"], "fleet ready")
        result["machine"] = ping_pong()
        result["direct"] = measure(f"{base}/v1/chat/completions", script, args.seconds)
        result["direct"].pop("answered")
        floor = free_port()
        start("bare-proxy", [sys.executable, "-m", "bench.bare_proxy", "--port", str(floor),
                             "--upstream", f"{base}/v1/chat/completions"], "bare proxy ready")
        result["bare_proxy"] = measure(f"http://127.0.0.1:{floor}/v1/chat/completions", script, args.seconds)
        result["bare_proxy"].pop("answered")
        stop_last()
        db = tmp / "traces.duckdb"
        for key, n in (("routelens", 1), ("routelens_workers", args.workers)):
            before = stored_traces(db)
            start(key, [*py, "serve", "--port", str(gw), "--workers", str(n)], "gateway ready")
            result[key] = measure(f"http://127.0.0.1:{gw}/v1/chat/completions", script, args.seconds,
                                  over_time=n == 1)
            stop_last()  # the gateway stores what it holds before it exits
            result[key]["traces"] = lost_check(result[key].pop("answered"), before, stored_traces(db))
        if not args.no_litellm:
            for key, n in (("litellm", 1), ("litellm_workers", args.workers)):
                try:
                    result[key] = _measure_litellm(tmp, base, args.seconds, start, stop_last, n)
                except (OSError, subprocess.SubprocessError, AssertionError, RuntimeError) as exc:
                    result[key] = {"version": LITELLM, "workers": n, "error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        while children:
            stop_last()
    for ours, theirs, key in (("routelens", "litellm", "ratio_rps_c16"),
                              ("routelens_workers", "litellm_workers", "ratio_rps_c16_workers")):
        if "c16" in result.get(theirs, {}):  # the same number of workers on both sides
            result[key] = round(result[ours]["c16"]["rps"] / max(result[theirs]["c16"]["rps"], 1e-9), 1)
    print(json.dumps(result))
    return 0
