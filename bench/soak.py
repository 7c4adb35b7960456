"""The soak: a steady load through two workers while everything goes wrong, then every count reconciled.

``python -m bench soak --minutes M [--rps R]`` runs, as real processes on loopback: a simulated fleet
of four (the built-in mix), a store (``routelens store``), a Redis of its own, and ``routelens serve
--workers 2`` relaying to that store and sharing that Redis, its spool on a small tmpfs when one can
be mounted. An open-loop client sends R requests/s (each with a 30 s client timeout) while a script
spread over the run crashes an instance, hangs another, drifts a third, kills (``-9``) and restarts
the store and Redis, and fills the spool's disk then frees it. At the end the answered requests,
the stored traces and ``replay --verify`` are reconciled, and every process's memory after
warm-up (a fifth of the run) is compared with its memory at the end, and its memory's slope over
the second half (sampled 40 times a run, every 5 to 30 s) says whether it is flat. The last line is
``{"answered", "traces", "lost", "duplicates", "client_timeouts", "verify", "rss_growth_mb": {...},
"rss_slope_mb_per_min": {...}, "rss_mb": {PROCESS: [11 points, start to end]}}``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import duckdb
import yaml

from app.run.local_redis import redis_argv
from app.run.procs import Child, free_port, port_is_free
from bench.openloop import open_loop
from bench.rss import RssCurve, tree
from sim.behaviour import builtin_config

__all__ = ["fill_disk", "main"]

CLIENT_TIMEOUT_S = 30.0
BODY = {"model": "auto", "messages": [{"role": "user", "content": "Summarise the main risks in this contract."}],
        "max_tokens": 64}


class Soak:
    """The processes of one run and the fault script that harasses them."""

    def __init__(self, tmp: Path, minutes: float) -> None:
        self.tmp, self.seconds = tmp, minutes * 60
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.children: dict[str, Child] = {}
        self.events: list[str] = []
        # Children die with the thread that started them (PR_SET_PDEATHSIG): restarts come from this one
        # thread, alive until the end, not from a short-lived pool thread whose exit would end them.
        self.launcher = ThreadPoolExecutor(1, thread_name_prefix="soak-launcher")
        self.disk = tmp / "spooldisk"  # every worker's spool sits beside the configured one: all on this disk
        self.disk.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(self.disk)],
                                 capture_output=True, text=True)
        self.tmpfs = mounted.returncode == 0
        base = free_port()
        for _ in range(20):  # four consecutive free ports for the fleet
            if all(port_is_free("127.0.0.1", base + i) for i in range(4)):
                break
            base = free_port()
        self.fleet = builtin_config(4, base, seed=7)
        self.instances = {s.id: s.url for s in self.fleet.fleet.instances}
        self.port, self.store_port = free_port(), free_port()
        self.redis_dir = tmp / "redis"
        self.redis_dir.mkdir()
        cfg = self.fleet.model_dump(mode="json", exclude_none=True)
        cfg.update({
            "gateway": {"host": "127.0.0.1", "port": self.port, "upstream_timeout_s": 10},
            "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 200,
                        "spool": {"dir": str(self.disk / "spool"), "segment_bytes": 256 * 1024}},
            "shared": {"backend": "redis", "url": f"unix://{self.redis_dir / 'redis.sock'}"},
            "probes": {"enabled": False},
        })
        self.config = tmp / "routelens.yaml"
        self.config.write_text(yaml.safe_dump(cfg))
        self.py = [sys.executable, "-m", "app", "--config", str(self.config)]
        # The store process keeps its own spool on the ordinary disk: the full disk is the gateways'
        cfg["storage"] = {**cfg["storage"], "spool": {}}
        self.store_config = tmp / "store.yaml"
        self.store_config.write_text(yaml.safe_dump(cfg))

    def start(self, name: str, argv: list[str], marker: str | None) -> Child:
        child = Child(name, argv, self.env, marker)
        if marker is not None:
            assert child.wait_ready(120), f"{name} did not start: {child.tail()}"
        self.children[name] = child
        return child

    def start_store(self) -> None:
        self.start("store", [sys.executable, "-m", "app", "--config", str(self.store_config), "store", "--port",
                             str(self.store_port), "--db", str(self.tmp / "store.duckdb")], "store ready")

    def start_redis(self) -> None:
        (self.redis_dir / "redis.sock").unlink(missing_ok=True)
        exe = shutil.which("redis-server")
        assert exe is not None, "redis-server is not installed"
        self.start("redis", redis_argv(exe, self.redis_dir), None)
        deadline = time.monotonic() + 10
        while not (self.redis_dir / "redis.sock").exists():
            assert time.monotonic() < deadline, "redis-server did not open its socket"
            time.sleep(0.05)

    def up(self) -> None:
        self.start("sim", [*self.py, "sim", "fleet"], "fleet ready")
        self.start_redis()
        self.start_store()
        self.start("gateway", [*self.py, "serve", "--workers", "2", "--store-url",
                               f"http://127.0.0.1:{self.store_port}"], "gateway ready")

    def kill(self, name: str) -> None:
        child = self.children.pop(name)
        child.proc.send_signal(signal.SIGKILL)
        child.proc.wait(10)
        child.stop()

    def pids(self) -> dict[str, list[int]]:
        return {name: tree(c.proc.pid) for name, c in self.children.items() if c.proc.poll() is None}

    async def script(self, http: aiohttp.ClientSession, origin: float) -> None:
        """The faults, at fixed shares of the run."""
        ids = list(self.instances)
        T = self.seconds

        async def at(share: float) -> None:
            await asyncio.sleep(max(0.0, origin + share * T - time.monotonic()))

        async def fault(iid: str, body: dict[str, Any]) -> None:
            async with http.post(f"{self.instances[iid]}/admin/faults", json=body) as resp:
                self.events.append(f"{time.monotonic() - origin:.1f}s {body['kind']} on {iid}: HTTP {resp.status}")

        await at(0.10)
        await fault(ids[0], {"kind": "crash", "duration_s": 0.15 * T})
        await at(0.20)
        await fault(ids[1], {"kind": "hang", "duration_s": 0.10 * T})
        await at(0.30)
        await fault(ids[2], {"kind": "drift", "duration_s": 0.15 * T})
        await at(0.40)
        self.kill("store")
        self.events.append(f"{time.monotonic() - origin:.1f}s store killed")
        await at(0.48)
        await asyncio.get_running_loop().run_in_executor(self.launcher, self.start_store)
        self.events.append(f"{time.monotonic() - origin:.1f}s store restarted")
        await at(0.55)
        self.kill("redis")
        self.events.append(f"{time.monotonic() - origin:.1f}s redis killed")
        await at(0.62)
        await asyncio.get_running_loop().run_in_executor(self.launcher, self.start_redis)
        self.events.append(f"{time.monotonic() - origin:.1f}s redis restarted")
        if self.tmpfs:
            await at(0.70)
            filler = fill_disk(self.disk)
            self.events.append(f"{time.monotonic() - origin:.1f}s spool disk full")
            await at(0.80)
            filler.unlink()
            self.events.append(f"{time.monotonic() - origin:.1f}s spool disk freed")

    def down(self) -> None:
        for name in ("gateway", "store", "redis", "sim"):
            if name in self.children:
                self.children.pop(name).stop()
        self.launcher.shutdown()
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.disk)], check=False)


def fill_disk(folder: Path) -> Path:
    """Fill the disk under ``folder`` with one file (written unbuffered until the disk says no); return it."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


async def _traffic(url: str, rps: float, seconds: float, answered: list[str], statuses: dict[int, int],
                   timeouts: list[float]) -> None:
    """Open-loop traffic (:func:`bench.openloop.open_loop`) for ``seconds``."""
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        async def one() -> None:
            try:
                async with http.post(url, json=BODY) as resp:
                    await resp.read()
                    statuses[resp.status] = statuses.get(resp.status, 0) + 1
                    if (rid := resp.headers.get("x-request-id")) is not None:
                        answered.append(rid)
            except TimeoutError:
                timeouts.append(time.monotonic())
            except aiohttp.ClientError:
                statuses[0] = statuses.get(0, 0) + 1

        await open_loop(rps, one, count=int(seconds * rps))


async def _run(soak: Soak, rps: float) -> dict[str, Any]:
    answered: list[str] = []
    statuses: dict[int, int] = {}
    timeouts: list[float] = []
    origin = time.monotonic()
    began = datetime.now(UTC)
    rss = RssCurve()
    step = min(30.0, max(5.0, soak.seconds / 40))  # 40 samples a run, every 5 to 30 s

    async def sample() -> None:
        for i in itertools.count():
            rss.sample(time.monotonic() - origin, soak.pids())
            if i * step >= soak.seconds:
                return
            await asyncio.sleep(max(0.0, origin + (i + 1) * step - time.monotonic()))

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        sampler = asyncio.create_task(sample())
        script = asyncio.create_task(soak.script(http, origin))
        await _traffic(f"http://127.0.0.1:{soak.port}/v1/chat/completions", rps, soak.seconds, answered, statuses,
                       timeouts)
        await script
        await sampler
    rss.sample(time.monotonic() - origin, soak.pids())
    return {"answered_ids": answered, "statuses": statuses, "timeouts": len(timeouts), "began": began,
            # from warm-up (a fifth of the run) to the end; the store and Redis, restarted since, left out
            "rss_growth_mb": rss.growth(0.2 * soak.seconds),
            # flat or not: the slope over the second half (the store and Redis: from their restart on)
            "rss_slope_mb_per_min": rss.slopes(0.5 * soak.seconds), "rss_mb": rss.curve()}


def _drain(gateway: str, timeout_s: float) -> bool:
    """Wait until both workers' backlogs are empty (a /metrics holds every worker's); False on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{gateway}/metrics", timeout=10) as resp:
                text = resp.read().decode()
        except OSError:
            time.sleep(0.5)
            continue
        pending = [float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("routelens_traces_pending{")]  # {worker="N"}
        if len(pending) == 2 and not any(pending):
            return True
        time.sleep(0.2)
    return False


def _health(gateway: str) -> dict[str, Any]:
    """Each worker's /health storage state (a few tries on new connections)."""
    seen: dict[str, Any] = {}
    for _ in range(10):
        req = urllib.request.Request(f"{gateway}/health", headers={"Connection": "close"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                seen[resp.headers.get("x-routelens-worker", "0")] = json.loads(resp.read()).get("storage")
        except urllib.error.HTTPError as exc:  # 503 while storage has a problem: its state is in the body
            seen[exc.headers.get("x-routelens-worker", "0")] = json.loads(exc.read() or b"{}").get("storage")
        except OSError as exc:
            seen["error"] = str(exc)
    return seen


def _stored(db: Path) -> tuple[int, dict[str, int]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT request_id, count(*) FROM traces GROUP BY request_id").fetchall()
    finally:
        con.close()
    return sum(n for _, n in rows), {rid: n for rid, n in rows}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench soak")
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--rps", type=float, default=20.0, help="requests per second, open loop")
    p.add_argument("--keep", action="store_true", help="keep the run's folder (printed on stderr)")
    args = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="routelens-soak-"))
    soak = Soak(tmp, args.minutes)
    try:
        soak.up()
        run = asyncio.run(_run(soak, args.rps))
        run["drained"] = _drain(f"http://127.0.0.1:{soak.port}", 60)
        if not run["drained"]:
            run["stuck"] = {"health": _health(f"http://127.0.0.1:{soak.port}"),
                            "store_log": soak.children["store"].tail()[-2000:],
                            "store_exit": soak.children["store"].proc.poll(),
                            "gateway_log": soak.children["gateway"].tail()[-2000:]}
        soak.children.pop("gateway").stop()  # its workers relay what their spools hold before they exit
        soak.children.pop("store").stop()  # and the store writes what it took
    finally:
        soak.down()
    total, by_id = _stored(tmp / "store.duckdb")
    answered = run["answered_ids"]
    from app.experiments.verify import verify_file

    report = verify_file(tmp / "store.duckdb", run["began"] - timedelta(minutes=1), datetime.now(UTC))
    out = {
        "minutes": args.minutes, "rps": args.rps, "answered": len(answered), "statuses": run["statuses"],
        "traces": total, "lost": sum(1 for rid in answered if rid not in by_id),
        "duplicates": sum(n - 1 for n in by_id.values() if n > 1), "client_timeouts": run["timeouts"],
        "verify": {"n": report.n, "reproduced": report.reproduced, "mismatched": report.mismatched,
                   "not_replayable": report.not_replayable,
                   "first": None if not report.mismatches else report.mismatches[0].model_dump(mode="json")},
        "lost_ids": [rid for rid in answered if rid not in by_id][:10],
        "drained": run["drained"], "stuck": run.get("stuck"), "rss_growth_mb": run["rss_growth_mb"],
        "rss_slope_mb_per_min": run["rss_slope_mb_per_min"], "rss_mb": run["rss_mb"],
        "spool_disk_full": soak.tmpfs, "events": soak.events,
    }
    if args.keep:
        print(f"soak folder: {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
