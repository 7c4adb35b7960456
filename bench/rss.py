"""Resident memory of a run's processes over time: sampled, then read as growth and as a slope.

A total growth from warm-up to the end cannot tell bounded caches filling (a rise that levels
off) from a leak (a rise that does not); the slope over the run's second half can. Each
process's samples are kept with the pids they were taken from, so a process restarted mid-run
(the soak's store and Redis) is read from its restart on, never across it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RssCurve", "rss_mb", "slope_per_min", "tree"]


def rss_mb(pid: int) -> float:
    """``pid``'s resident set (VmRSS) in MB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (serve's worker processes)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            kids = []
        todo.extend(int(k) for k in kids)
    return out


def slope_per_min(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(seconds, MB)`` points in MB per minute (None: fewer than 3 points)."""
    if len(points) < 3:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return None
    return 60 * sum((t - mt) * (v - mv) for t, v in points) / var


@dataclass
class RssCurve:
    """Samples ``(seconds into the run, MB summed over a process tree, its pids)`` per process name."""

    samples: dict[str, list[tuple[float, float, tuple[int, ...]]]] = field(default_factory=dict)

    def sample(self, t: float, pids: dict[str, list[int]]) -> None:
        """Record each named process tree's RSS at ``t`` (a tree whose process is gone is skipped)."""
        for name, tree_pids in pids.items():
            mb = [rss_mb(p) for p in tree_pids]
            if mb and mb[0] > 0:
                self.samples.setdefault(name, []).append((t, sum(mb), tuple(sorted(tree_pids))))

    def _current(self, name: str, since: float) -> list[tuple[float, float]]:
        """The samples from ``since`` on, of the processes sampled last (none from before a restart)."""
        rows = self.samples.get(name, [])
        if not rows:
            return []
        last = rows[-1][2]
        out: list[tuple[float, float]] = []
        for t, mb, pids in reversed(rows):
            if pids != last or t < since:
                break
            out.append((t, mb))
        return out[::-1]

    def growth(self, since: float) -> dict[str, float]:
        """MB from the first sample at or after ``since`` to the last, per process unchanged over that span."""
        out = {}
        for name, rows in self.samples.items():
            span = self._current(name, since)
            if len(span) >= 2 and span[0][0] == min((t for t, _, _ in rows if t >= since), default=-1):
                out[name] = round(span[-1][1] - span[0][1], 1)
        return out

    def slopes(self, since: float) -> dict[str, float]:
        """MB per minute (least squares) from ``since`` on, per process, from its latest start if later."""
        out = {}
        for name in self.samples:
            s = slope_per_min(self._current(name, since))
            if s is not None:
                out[name] = round(s, 2)
        return out

    def curve(self, points: int = 11) -> dict[str, list[float]]:
        """Per process, the RSS at ``points`` evenly spread samples (first to last), in MB."""
        out = {}
        for name, rows in self.samples.items():
            idx = sorted({round(i * (len(rows) - 1) / max(1, points - 1)) for i in range(points)})
            out[name] = [round(rows[i][1], 1) for i in idx]
        return out
