"""wrk runs whose latencies can be pooled, and the CPU the server under load spent on them.

Each run's script ends with a ``done`` hook that writes wrk's whole latency histogram (µs, count)
to a file: the one wrk's own ``--latency`` percentiles come from, with the samples its
coordinated-omission correction adds for answers slower than the run's mean interval. Several
short runs of one path, interleaved with the other paths' runs, make one distribution
(:class:`Tally`): a machine whose speed changes from one minute to the next then weighs on every
path alike, instead of on whichever path ran during its slow minute.
:func:`tree_cpu_s` reads the CPU time of a server and all its descendants from ``/proc``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.run.procs import descendants, stat_fields

__all__ = ["Tally", "body_script", "run", "summary", "tree_cpu_s"]

_HIST_ENV = "ROUTELENS_WRK_HIST"
_DONE = f"""
done = function(summary, latency, requests)
  local f = assert(io.open(os.getenv("{_HIST_ENV}"), "w"))
  for i = 1, #latency do
    local v, c = latency(i)
    f:write(string.format("%d %d\\n", v, c))
  end
  f:close()
end
"""


def body_script(tmp: Path, name: str, body: dict[str, Any], headers: dict[str, str]) -> Path:
    """Write a wrk script that POSTs ``body`` (JSON) with ``headers`` and dumps the latency histogram."""
    text = json.dumps(body, ensure_ascii=False).replace("\\", "\\\\").replace("'", "\\'")
    lines = ["wrk.method = 'POST'", f"wrk.body = '{text}'"]
    lines += [f"wrk.headers['{k}'] = '{v}'" for k, v in headers.items()]
    path = tmp / f"{name}.lua"
    path.write_text("\n".join(lines) + "\n" + _DONE, encoding="utf-8")
    return path


@dataclass
class Tally:
    """Pooled wrk runs of one path at one concurrency."""

    hist: Counter[int] = field(default_factory=Counter)  # latency (µs) -> requests
    requests: int = 0
    seconds: float = 0.0
    non_2xx: int = 0
    cpu_s: float = 0.0
    machine: Counter[str] = field(default_factory=Counter)  # the whole machine's CPU time by state (jiffies)

    def percentile_ms(self, q: float) -> float:
        """The smallest latency (ms) that at least ``q`` of the pooled requests did not exceed."""
        total = sum(self.hist.values())
        if total == 0:
            raise RuntimeError("no latency was measured")
        need, seen = q * total, 0
        for value in sorted(self.hist):
            seen += self.hist[value]
            if seen >= need:
                return value / 1e3
        return max(self.hist) / 1e3

    def figures(self) -> dict[str, float]:
        """p50/p99 (ms), requests, requests/s, non-2xx answers and the server's CPU per request (µs)."""
        all_cpu = max(self.machine["total"], 1)
        return {"p50_ms": round(self.percentile_ms(0.50), 3), "p99_ms": round(self.percentile_ms(0.99), 3),
                "requests": self.requests, "rps": round(self.requests / max(self.seconds, 1e-9), 1),
                "non_2xx": self.non_2xx,
                "cpu_us_per_request": round(self.cpu_s / max(self.requests, 1) * 1e6, 1),
                "machine_idle_share": round(self.machine["idle"] / all_cpu, 3),
                "machine_steal_share": round(self.machine["steal"] / all_cpu, 3)}


def run(url: str, script: Path, connections: int, seconds: float, tally: Tally | None = None,
        server_pid: int | None = None, settle: Callable[[], object] | None = None) -> Tally:
    """One ``wrk -t1 -cC`` run against ``url``, added to ``tally`` (a new one by default).

    ``settle`` runs after the load and before the server's CPU is read: a gateway that stores its
    traces after answering counts that work in this run (:func:`bench.drain.drained`).
    """
    tally = tally if tally is not None else Tally()
    with tempfile.NamedTemporaryFile(prefix="wrk-hist-", suffix=".txt", delete=False) as f:
        hist_path = Path(f.name)
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "--latency",
            "-s", str(script), url]
    cpu0 = tree_cpu_s(server_pid) if server_pid else 0.0
    machine0 = machine_times()
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=True,
                             env={**os.environ, _HIST_ENV: str(hist_path)}).stdout
        for line in hist_path.read_text().splitlines():
            value, count = line.split()
            tally.hist[int(value)] += int(count)
    finally:
        hist_path.unlink(missing_ok=True)
    tally.machine.update(machine_times() - machine0)
    if settle is not None:
        settle()
    if server_pid:
        tally.cpu_s += tree_cpu_s(server_pid) - cpu0
    requests, seconds, non_2xx = summary(out, url)
    tally.requests += requests
    tally.seconds += seconds
    tally.non_2xx += non_2xx
    return tally


def summary(out: str, url: str = "") -> tuple[int, float, int]:
    """``(requests, seconds, non-2xx answers)`` from wrk's printed summary."""
    done = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m),", out)
    if done is None:  # no request completed: say so instead of a KeyError
        raise RuntimeError(f"wrk measured nothing against {url}: {' '.join(out.split())[-300:]}")
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[done.group(3)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return int(done.group(1)), float(done.group(2)) * scale, int(errors.group(1)) if errors else 0


def machine_times(stat: str | None = None) -> Counter[str]:
    """All CPUs' time since boot (jiffies): ``total``, ``idle`` (idle and I/O wait) and ``steal``.

    Steal is the time the hypervisor ran something else while one of this VM's CPUs had work: on
    this machine it comes and goes with the host's load, and it is what makes a run slow.
    """
    # the first line: cpu user nice system idle iowait irq softirq steal (guest time is inside user)
    values = [int(v) for v in (stat or Path("/proc/stat").read_text()).split("\n", 1)[0].split()[1:9]]
    return Counter({"total": sum(values), "idle": values[3] + values[4], "steal": values[7]})


def tree_cpu_s(pid: int) -> float:
    """User plus system CPU seconds of ``pid`` and every live process below it (0 for one that has gone)."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for p in {pid} | descendants(pid):
        if (fields := stat_fields(p)) is not None:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total
