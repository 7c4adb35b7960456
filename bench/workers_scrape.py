"""``python -m bench.workers_scrape``: what scraping a big fleet costs ``serve --workers 2``, idle.

One process serves the 13 kB vLLM ``/metrics`` body of ``tests/contracts/prometheus`` for
``--instances`` instances (one port, a path each: ``/i000/metrics``...) and counts the scrapes.
``routelens serve --workers 2`` (probes off, the default 1 s scrape interval) runs against it with
no traffic, so what its workers spend is the scraping (and their idle upkeep). After ``--settle``
seconds, the CPU of each worker, of the store process and of the fleet is read from ``/proc`` over
``--seconds``. ``--vs DIR`` runs another checkout (``git worktree add DIR REV``, with the compiled
``ingest/codec/_ndjson_arrow*.so`` copied in) the same way, the two in turns for ``--rounds``.
Prints one JSON line last: per tree, the scrapes a second the fleet answered and each process's
CPU seconds a second (every round, then the median).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
BODY = ROOT / "tests" / "contracts" / "prometheus" / "datadog_vllm_v0_opt125m_metrics.txt"
_TICK = os.sysconf("SC_CLK_TCK")


def _serve_fleet(port: int) -> None:
    """Answer the vLLM body on ``/{instance}/metrics`` and the scrape count on ``/count``, until killed."""
    from aiohttp import web

    body, hits = BODY.read_bytes(), [0]

    async def metrics(_: web.Request) -> web.Response:
        hits[0] += 1
        return web.Response(body=body, content_type="text/plain")

    async def count(_: web.Request) -> web.Response:
        return web.Response(text=str(hits[0]))

    app = web.Application()
    app.router.add_get("/count", count)
    app.router.add_get("/{instance}/metrics", metrics)
    web.run_app(app, host="127.0.0.1", port=port, print=lambda _: print("fleet ready", flush=True),
                access_log=None)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(c) for c in text]
    return out


def _role(pid: int) -> str | None:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    if b"store" in argv:
        return "store"
    if b"--worker" in argv:
        return f"worker_{argv[argv.index(b'--worker') + 1].decode()}"
    return None


def _count(port: int) -> int:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/count", timeout=5) as resp:
        return int(resp.read())


def _wait_line(log: Path, marker: str, timeout_s: float = 120) -> None:
    """Until a line of the process's output file starts with ``marker``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if any(line.startswith(marker) for line in log.read_text(errors="replace").splitlines()):
            return
        time.sleep(0.2)
    raise SystemExit(f"no {marker!r} in {log}:\n{log.read_text(errors='replace')[-2000:]}")


def _one(tree: Path, fleet_port: int, fleet_pid: int, instances: int, settle_s: float, seconds: float,
         folder: Path) -> dict[str, float]:
    from app.run.procs import free_port

    port = free_port()
    cfg = folder / f"routelens-{tree.name}.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(folder / f"{tree.name}-{port}.duckdb")},
        "probes": {"enabled": False},
        "fleet": {"instances": [{"id": f"i{k:03d}", "model": f"m{k % 20}",
                                 "url": f"http://127.0.0.1:{fleet_port}/i{k:03d}"} for k in range(instances)]},
    }))
    log = folder / f"serve-{tree.name}-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--config", str(cfg), "--workers", "2"],
                                cwd=tree, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_line(log, "gateway ready http")
        time.sleep(settle_s)
        pids = {"worker_0": proc.pid, **{r: c for c in _children(proc.pid) if (r := _role(c)) is not None}}
        pids["fleet"] = fleet_pid
        before = {name: _cpu_s(pid) for name, pid in pids.items()}
        hits, start = _count(fleet_port), time.monotonic()
        time.sleep(seconds)
        took = time.monotonic() - start
        row = {f"{name}_cpu_s_per_s": round((_cpu_s(pid) - before[name]) / took, 4) for name, pid in pids.items()}
        row["scrapes_per_s"] = round((_count(fleet_port) - hits) / took, 1)
        return row
    finally:
        proc.terminate()
        proc.wait(30)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--instances", type=int, default=200)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--settle", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--vs", type=Path, help="another checkout, run the same way in turns")
    p.add_argument("--serve-fleet", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_fleet is not None:
        _serve_fleet(args.serve_fleet)
        return 0
    from app.run.procs import free_port

    trees = {"head": ROOT, **({"vs": args.vs.resolve()} if args.vs else {})}
    fleet_port = free_port()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "fleet.log"
        with log.open("w") as out:
            fleet = subprocess.Popen([sys.executable, "-m", "bench.workers_scrape", "--serve-fleet", str(fleet_port)],
                                     cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_line(log, "fleet ready")
            for _ in range(args.rounds):
                for name, tree in trees.items():
                    run = _one(tree, fleet_port, fleet.pid, args.instances, args.settle, args.seconds, Path(tmp))
                    print(name, json.dumps(run), flush=True)
                    runs[name].append(run)
        finally:
            fleet.terminate()
            fleet.wait(10)
    result: dict[str, Any] = {"instances": args.instances, "seconds": args.seconds}
    for name, rows in runs.items():
        keys = sorted({k for r in rows for k in r})
        result[name] = {"runs": rows, "median": {k: statistics.median(r[k] for r in rows if k in r) for k in keys}}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
