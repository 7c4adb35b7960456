"""``python -m bench.soak_workers``: ``serve --workers 2`` sharing its scrapes, soaked under faults.

Real processes on loopback: ``routelens sim fleet`` (``--instances``, the built-in mix, a fault log),
``routelens serve --workers 2`` on a configuration of its own (temp folder; the shipped
constraints, probes on, ``scrape.interval_s`` 1) and an open-loop client (``--rps``). A script
spread over ``--minutes`` crashes an instance (it comes back), slows one, puts one under KV
pressure, gives one an error burst, SIGSTOPs worker 0 for ``--stop-s``, kills worker 1 with
SIGKILL (serve restarts it) and restarts the fleet process. Every second it reads
``GET /v1/router/state`` of both workers (new connections until each answered) and the gateway's
``/metrics``; every 10 s each worker's RSS and open fds. At the end: answered requests against
stored traces, latch changes per worker and how far apart, scrape rounds per worker and source,
RSS and fds, log lines by level. ``--latency S`` instead times c=1 requests for S seconds against
a zero-delay fleet and no faults (``--tree DIR``: another checkout). Prints one JSON line last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import duckdb
import yaml

from app.run.procs import free_port, port_is_free

ROOT = Path(__file__).resolve().parent.parent
BODY = {"model": "auto", "messages": [{"role": "user", "content": "Summarise the main risks in this contract."}],
        "max_tokens": 32}


def _config(tmp: Path, instances: int, base: int, port: int, zero_delay: bool, probes: bool) -> Path:
    from sim.behaviour import builtin_config

    cfg = builtin_config(instances, base, seed=7, zero_delay=zero_delay).model_dump(mode="json", exclude_none=True)
    shipped = yaml.safe_load((ROOT / "routelens.yaml").read_text())
    cfg.update({"gateway": {"host": "127.0.0.1", "port": port, "max_attempts": 2, "upstream_timeout_s": 10},
                "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 200},
                "constraints": shipped["constraints"], "scrape": {"interval_s": 1.0},
                "probes": {"enabled": probes, "interval_s": 10.0}})
    path = tmp / "routelens.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class Run:
    def __init__(self, tree: Path, tmp: Path, instances: int, zero_delay: bool, probes: bool) -> None:
        self.tree, self.tmp = tree, tmp
        base = free_port()
        for _ in range(50):
            if all(port_is_free("127.0.0.1", base + i) for i in range(instances)):
                break
            base = free_port()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cfg = _config(tmp, instances, base, self.port, zero_delay, probes)
        self.ids = [s["id"] for s in yaml.safe_load(self.cfg.read_text())["fleet"]["instances"]]
        self.inst_url = {s["id"]: s["url"] for s in yaml.safe_load(self.cfg.read_text())["fleet"]["instances"]}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def _start(self, name: str, args: list[str], marker: str) -> None:
        log = self.tmp / f"{name}.log"
        with log.open("ab") as out:
            self.procs[name] = subprocess.Popen([sys.executable, "-m", "app", "--config", str(self.cfg), *args],
                                                cwd=self.tree, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                                start_new_session=True)
        end = time.monotonic() + 120
        while marker not in log.read_text(errors="replace"):
            if time.monotonic() > end or self.procs[name].poll() is not None:
                raise SystemExit(f"{name} did not start: {log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def start_fleet(self) -> None:
        self._start("fleet", ["sim", "fleet", "--fault-log", str(self.tmp / "faults.jsonl")], "fleet ready")

    def start_gateway(self) -> None:
        self._start("gateway", ["serve", "--workers", "2"], "gateway ready")

    def stop(self, name: str, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, sig)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def workers(self) -> dict[str, int]:
        pid = self.procs["gateway"].pid
        out = {"0": pid}
        for task in Path(f"/proc/{pid}/task").iterdir():
            for c in (task / "children").read_text().split():
                argv = Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")
                if b"--worker" in argv:
                    out[argv[argv.index(b"--worker") + 1].decode()] = int(c)
        return out


def _get(url: str, close: bool = True) -> tuple[str, bytes]:
    req = urllib.request.Request(url, headers={"Connection": "close"} if close else {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(resp.headers.get("x-routelens-worker")), resp.read()


def _states(url: str) -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for _ in range(12):
        try:
            w, body = _get(f"{url}/v1/router/state")
        except OSError:
            continue
        seen.setdefault(w, json.loads(body))
        if len(seen) == 2:
            break
    return seen


def _summary(state: dict[str, Any]) -> dict[str, Any]:
    inst = {s["instance"]: s for s in state["instances"]}
    return {"source": state.get("scrape", {}).get("source"),
            "out": sorted(f"{i}:{latch['constraint']}" for i, s in inst.items() for latch in s.get("latches", [])
                          if latch.get("out")),
            "stale": sorted(i for i, s in inst.items() if s.get("stale")),
            "scraped_at": {i: s.get("scraped_at") for i, s in inst.items()},
            "breakers": sorted(_breaker(b) for b in (state.get("breakers") or {}).get("breakers", [])
                               if b.get("state") != "closed")}


def _breaker(b: dict[str, Any]) -> str:
    name = b.get("id") or b.get("name") or b.get("key") or b.get("instance")
    return f"{b.get('scope', '')}:{name}:{b.get('state')}"


_ROUNDS = re.compile(r'^routelens_scrape_rounds_total\{[^}]*worker="(\d+)"[^}]*\} ([0-9.e+]+)', re.M)


def _rounds(url: str) -> dict[str, float]:
    try:
        _, body = _get(f"{url}/metrics")
    except OSError:
        return {}
    return {w: float(v) for w, v in _ROUNDS.findall(body.decode())}


def _proc(pid: int) -> dict[str, float]:
    try:
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        return {"rss_mb": round(rss, 1), "fds": len(os.listdir(f"/proc/{pid}/fd")),
                "threads": len(os.listdir(f"/proc/{pid}/task"))}
    except OSError:
        return {}


async def _traffic(url: str, rps: float, seconds: float, out: list[dict[str, Any]], c1: bool) -> None:
    conn = aiohttp.TCPConnector(force_close=True)  # a new connection each: either worker answers, as from many clients
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30), connector=conn) as http:
        async def one() -> None:
            t0 = time.perf_counter()
            row: dict[str, Any] = {"t": time.monotonic()}
            try:
                async with http.post(f"{url}/v1/chat/completions", json=BODY) as resp:
                    await resp.read()
                    row.update(status=resp.status, rid=resp.headers.get("x-request-id"),
                               worker=resp.headers.get("x-routelens-worker"))
            except (aiohttp.ClientError, TimeoutError) as exc:
                row["error"] = type(exc).__name__
            row["ms"] = (time.perf_counter() - t0) * 1e3
            out.append(row)

        end = time.monotonic() + seconds
        if c1:
            while time.monotonic() < end:
                await one()
            return
        tasks: set[asyncio.Task[None]] = set()
        k, start = 0, time.monotonic()
        while time.monotonic() < end:
            task = asyncio.create_task(one())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            k += 1
            await asyncio.sleep(max(0.0, start + k / rps - time.monotonic()))
        await asyncio.gather(*tasks)


def _pct(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    if not xs:
        return {}
    return {f"p{q}": round(xs[min(len(xs) - 1, int(q / 100 * len(xs)))], 2) for q in (50, 90, 99)} | {
        "max": round(xs[-1], 2), "n": len(xs)}


async def _soak(run: Run, minutes: float, rps: float, stop_s: float) -> dict[str, Any]:
    T, origin = minutes * 60, time.monotonic()
    rows: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    procs: list[dict[str, Any]] = []
    events: list[str] = []
    loop = asyncio.get_running_loop()

    def note(what: str) -> None:
        events.append(f"{time.monotonic() - origin:.1f}s {what}")

    async def at(share: float) -> None:
        await asyncio.sleep(max(0.0, origin + share * T - time.monotonic()))

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        async def fault(i: int, body: dict[str, Any]) -> None:
            iid = run.ids[i]
            async with http.post(f"{run.inst_url[iid]}/admin/faults", json=body) as resp:
                note(f"{body['kind']} on {iid}: HTTP {resp.status}")

        async def script() -> None:
            await at(0.08)
            await fault(0, {"kind": "crash", "duration_s": 0.08 * T})
            await at(0.20)
            await fault(1, {"kind": "slow", "factor": 8, "duration_s": 0.08 * T})
            await at(0.32)
            await fault(2, {"kind": "kv-pressure", "rate": 0.97, "period_s": 10, "duration_s": 0.08 * T})
            await at(0.44)
            await fault(3, {"kind": "error", "rate": 1.0, "duration_s": 0.05 * T})
            await at(0.52)  # a hung instance makes worker 0's rounds last its scrape timeout: a stop lands mid-round
            await fault(4, {"kind": "hang", "duration_s": 0.1 * T})
            for _ in range(3):
                await asyncio.sleep(1.3)
                os.kill(run.workers()["0"], signal.SIGSTOP)
                note("SIGSTOP worker 0")
                await asyncio.sleep(stop_s)
                os.kill(run.workers()["0"], signal.SIGCONT)
                note("SIGCONT worker 0")
                await asyncio.sleep(6)
            await at(0.65)
            os.kill(run.workers()["1"], signal.SIGKILL)
            note("SIGKILL worker 1")
            await at(0.77)
            await loop.run_in_executor(None, run.stop, "fleet", signal.SIGKILL)
            note("fleet killed")
            await asyncio.sleep(3)
            await loop.run_in_executor(None, run.start_fleet)
            note("fleet restarted")

        async def sampler() -> None:
            k = 0
            while time.monotonic() - origin < T:
                t = time.monotonic() - origin
                states = await loop.run_in_executor(None, _states, run.url)
                rounds = await loop.run_in_executor(None, _rounds, run.url)
                samples.append({"t": round(t, 1), "w": {w: _summary(s) for w, s in states.items()}, "rounds": rounds})
                if k % 10 == 0:
                    procs.append({"t": round(t, 1), **{w: _proc(p) for w, p in run.workers().items()}})
                k += 1
                await asyncio.sleep(max(0.0, origin + k - time.monotonic()))

        await asyncio.gather(script(), sampler(), _traffic(run.url, rps, T, rows, False))
    return {"rows": rows, "samples": samples, "procs": procs, "events": events}


def _latches(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """When each latch went out / came back on each worker, and the gap between the workers."""
    changes: dict[str, dict[str, list[tuple[str, float]]]] = {"0": {}, "1": {}}
    last: dict[str, set[str]] = {"0": set(), "1": set()}
    for s in samples:
        for w, summ in s["w"].items():
            now = set(summ["out"])
            for name in now - last[w]:
                changes[w].setdefault(name, []).append(("out", s["t"]))
            for name in last[w] - now:
                changes[w].setdefault(name, []).append(("in", s["t"]))
            last[w] = now
    gaps = []
    for name, seq in changes["0"].items():
        other = changes["1"].get(name, [])
        for (kind, t0), (kind1, t1) in zip(seq, other, strict=False):
            if kind == kind1:
                gaps.append(abs(t0 - t1))
    only = {w: sorted(set(changes[w]) - set(changes["1" if w == "0" else "0"])) for w in changes}
    return {"changes": changes, "gap_s": _pct(gaps), "only_on": only}


def _disagree(samples: list[dict[str, Any]]) -> dict[str, Any]:
    out, both = 0, 0
    sat_diff = 0
    for s in samples:
        if len(s["w"]) != 2:
            continue
        both += 1
        a, b = s["w"]["0"], s["w"]["1"]
        if a["out"] != b["out"]:
            out += 1
        sat_diff += sum(1 for i in a["scraped_at"] if a["scraped_at"][i] != b["scraped_at"].get(i))
    last: dict[tuple[str, str], str] = {}
    backwards = []
    for s in samples:
        for w, summ in s["w"].items():
            for i, at in summ["scraped_at"].items():
                if at and last.get((w, i)) and at < last[(w, i)]:
                    backwards.append(f"{s['t']}s worker {w} {i}: {last[(w, i)]} -> {at}")
                if at:
                    last[(w, i)] = at
    sources = [s["w"].get("1", {}).get("source") for s in samples]
    return {"samples_both": both, "latch_sets_differ": out, "scraped_at_differ_instance_samples": sat_diff,
            "scraped_at_backwards": backwards[:10], "w1_source": {x: sources.count(x) for x in set(sources)},
            "w1_own_at": [s["t"] for s in samples if s["w"].get("1", {}).get("source") == "own"][:60]}


def _stored(db: Path) -> set[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT request_id FROM traces").fetchall()}
    finally:
        con.close()


def _logs(tmp: Path) -> dict[str, Any]:
    text = (tmp / "gateway.log").read_text(errors="replace")
    levels: dict[str, int] = {}
    for m in re.finditer(r"\b(DEBUG|INFO|WARNING|ERROR|CRITICAL)\b", text):
        levels[m.group(1)] = levels.get(m.group(1), 0) + 1
    warn: dict[str, int] = {}
    for line in text.splitlines():
        if "WARNING" in line or "ERROR" in line:
            key = re.sub(r"\d+(\.\d+)?", "N", line.split("WARNING", 1)[-1].split("ERROR", 1)[-1])[:90]
            warn[key] = warn.get(key, 0) + 1
    return {"levels": levels, "tracebacks": text.count("Traceback"),
            "warnings_by_kind": dict(sorted(warn.items(), key=lambda kv: -kv[1])[:25])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--rps", type=float, default=8.0)
    p.add_argument("--instances", type=int, default=8)
    p.add_argument("--stop-s", type=float, default=4.0, help="how long worker 0 is stopped")
    p.add_argument("--latency", type=float, help="c=1 requests for this many seconds (no faults), then stop")
    p.add_argument("--tree", type=Path, default=ROOT)
    p.add_argument("--folder", type=Path)
    args = p.parse_args(argv)
    tmp = args.folder or Path(tempfile.mkdtemp(prefix="soak-workers-"))
    tmp.mkdir(parents=True, exist_ok=True)
    run = Run(args.tree.resolve(), tmp, args.instances, args.latency is not None, args.latency is None)
    out: dict[str, Any] = {"folder": str(tmp), "tree": str(args.tree)}
    try:
        run.start_fleet()
        run.start_gateway()
        if args.latency is not None:
            time.sleep(5)
            rows: list[dict[str, Any]] = []
            asyncio.run(_traffic(run.url, 0, args.latency, rows, True))
            ok = [r["ms"] for r in rows if r.get("status") == 200]
            out |= {"c1_ms": _pct(ok), "mean_ms": round(statistics.fmean(ok), 2) if ok else None,
                    "not_ok": len(rows) - len(ok)}
        else:
            res = asyncio.run(_soak(run, args.minutes, args.rps, args.stop_s))
            time.sleep(5)
            run.stop("gateway")
            rows = res["rows"]
            answered = {r["rid"] for r in rows if r.get("rid")}
            stored = _stored(tmp / "traces.duckdb")
            statuses: dict[str, int] = {}
            for r in rows:
                key = str(r.get("status", r.get("error")))
                statuses[key] = statuses.get(key, 0) + 1
            samples = res["samples"]
            rounds = [s["rounds"] for s in samples if len(s["rounds"]) == 2]
            out |= {"answered": len(answered), "statuses": statuses, "stored": len(stored),
                    "lost": sorted(answered - stored)[:10], "lost_n": len(answered - stored),
                    "latency_ms": _pct([r["ms"] for r in rows if r.get("status") == 200]),
                    "events": res["events"], "latches": _latches(samples), "agree": _disagree(samples),
                    "rounds_first_last": [rounds[0], rounds[-1]] if rounds else None,
                    "procs": res["procs"], "logs": _logs(tmp)}
            (tmp / "samples.json").write_text(json.dumps(samples))
    finally:
        run.stop("gateway")
        run.stop("fleet")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
