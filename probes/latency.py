"""The latency probe: a fixed prompt, P50/P95 over a sliding window, a learned baseline and a trend test.

Per instance the last ``window`` latencies of successful probes give P50/P95 (linear
interpolation). The first ``baseline_probes`` successful probes make the baseline (kept in a
:class:`~probes.baselines.BaselineStore`, so a restart does not relearn a degraded state as
normal). The verdict is ``degraded`` when the window's p95, else its p50, is off its baseline by
more than ``tolerance`` in either direction (much faster is suspicious too: an instance that
answers from an error path), or when the last ``trend_window`` latencies creep up: a one-sided
Mann-Kendall test with p < ``trend_p`` and a Theil-Sen rise (slope x ``trend_window``) of at
least ``trend_min_rise`` x the baseline p95. A request that failed is ``failed``.

A window holding fewer probes than the baseline was learned from (after a start with a baseline
loaded from the file, or one another process changed) is not comparable to it: the p95 of a few
probes reads low (one probe's p95 is that probe) and their p50 is one or two draws. Until it
holds ``min(window, baseline samples)`` probes only what a later, full window would say as well
is judged: a p95 already above the baseline's band (it can only read lower than the truth), and
the trend test. Otherwise the probe is ``ok`` with a reason saying the window is filling, and
carries no baseline (as while learning), so nothing re-reads its short-window p95 against the band.

The statistics are pure Python: the Mann-Kendall p-value is exact (Mahonian distribution of
inversions) up to 60 points, a normal approximation beyond; tied pairs count half discordant.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from probes.baselines import Baseline, BaselineStore
from probes.http import ChatCall
from probes.syntax import upstream_error
from probes.types import Judgement
from schemas.common import ProbeVerdict
from schemas.config.probes import LatencyProbeSettings

__all__ = ["LatencyTracker", "latency_body", "latency_prompt", "mann_kendall_p", "percentile", "theil_sen_slope"]

log = logging.getLogger(__name__)
_WORDS = ("the", "quick", "probe", "reads", "a", "fixed", "text", "of", "plain", "words", "so", "every", "run",
          "costs", "the", "same", "number", "of", "tokens")


def latency_prompt(tokens: int) -> str:
    """A deterministic English filler of exactly ``4 * tokens`` characters.

    At four characters per token (the simulator's ``estimate_tokens`` and a fair average for
    English words on BPE tokenizers) this is ``tokens`` tokens.
    """
    out: list[str] = []
    size, i = 0, 0
    while size < 4 * tokens:
        word = _WORDS[i % len(_WORDS)]
        out.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(out)[: 4 * tokens]


def latency_body(settings: LatencyProbeSettings, model: str) -> dict[str, Any]:
    """The latency probe's request body (same prompt every time)."""
    return {"model": model, "messages": [{"role": "user", "content": latency_prompt(settings.prompt_tokens)}],
            "max_tokens": settings.max_tokens, "stream": False}


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation (numpy's default)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _mahonian_cdf(n: int, k: int) -> float:
    """P(a random permutation of n items has at most k inversions)."""
    counts = [1]
    for m in range(2, n + 1):
        nxt = [0] * (len(counts) + m - 1)
        run = 0
        for j in range(len(nxt)):
            run += counts[j] if j < len(counts) else 0
            if j - m >= 0:
                run -= counts[j - m]
            nxt[j] = run
        counts = nxt
    return sum(counts[: k + 1]) / math.factorial(n)


def mann_kendall_p(values: Sequence[float]) -> float:
    """One-sided Mann-Kendall p-value that ``values`` rise (small: a monotone increase)."""
    n = len(values)
    if n < 3:
        return 1.0
    discordant = 0.0
    s = 0
    for i in range(n):
        for j in range(i + 1, n):
            d = values[j] - values[i]
            discordant += 1.0 if d < 0 else (0.5 if d == 0 else 0.0)
            s += (d > 0) - (d < 0)
    if n <= 60:
        return _mahonian_cdf(n, math.floor(discordant))
    var = n * (n - 1) * (2 * n + 5) / 18.0
    z = (s - 1) / math.sqrt(var) if s > 0 else 0.0
    return 0.5 * math.erfc(z / math.sqrt(2))


def theil_sen_slope(values: Sequence[float]) -> float:
    """Median of the pairwise slopes of ``values`` against their index."""
    slopes = [(values[j] - values[i]) / (j - i) for i in range(len(values)) for j in range(i + 1, len(values))]
    return percentile(slopes, 50) if slopes else 0.0


class LatencyTracker:
    """Windows and baselines of every instance; :meth:`observe` judges one probe.

    Args:
        settings: The ``probes.latency`` section.
        store: Where learned baselines live.
        wall: The wall clock (stamps a learned baseline).
    """

    def __init__(self, settings: LatencyProbeSettings, store: BaselineStore,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.settings = settings
        self.store = store
        self.wall = wall
        self._recent: dict[str, deque[float]] = {}
        self._learning: dict[str, list[float]] = {}

    def window(self, instance: str) -> list[float]:
        """The latencies (ms) of the instance's sliding window, oldest first."""
        return list(self._recent.get(instance, ()))[-self.settings.window:]

    def observe(self, instance: str, call: ChatCall) -> Judgement:
        """Add one probe's latency to the instance's window and judge it."""
        s = self.settings
        self.store.refresh()  # `routelens probes baselines --forget` may have dropped some since
        for dropped in self.store.take_dropped():
            self._recent.pop(dropped, None)  # judged against the new baseline from its first probe on
            self._learning.pop(dropped, None)
            log.warning("latency baseline of %s dropped from %s: learned again from its next %d healthy probes",
                        dropped, self.store.path, s.baseline_probes)
        if call.error_class is not None or call.status != 200:
            what = call.error if call.error_class is not None else f"HTTP {call.status}: {upstream_error(call.body)}"
            return Judgement(ProbeVerdict.FAILED, None, None, f"latency probe failed: {what}",
                             call.error_class or "http_status", latency_ms=call.elapsed_ms)
        latency = call.elapsed_ms
        recent = self._recent.setdefault(instance, deque(maxlen=max(s.window, s.trend_window)))
        recent.append(latency)
        window = self.window(instance)
        p95, p50 = percentile(window, 95), percentile(window, 50)
        base = self.store.get(instance)
        if base is None:
            learning = self._learning.setdefault(instance, [])
            learning.append(latency)
            if len(learning) < s.baseline_probes:
                return Judgement(ProbeVerdict.OK, p95, None, f"learning baseline ({len(learning)}/{s.baseline_probes})",
                                 latency_ms=latency)
            base = Baseline(percentile(learning, 50), percentile(learning, 95), len(learning), self.wall().isoformat())
            self.store.set(instance, base)
            del self._learning[instance]
        return self._judge(recent, p50, p95, base, latency, len(window))

    def _judge(self, recent: deque[float], p50: float, p95: float, base: Baseline, latency: float,
               size: int) -> Judgement:
        s = self.settings
        threshold = base.p95_ms * (1 + s.tolerance)
        full = min(s.window, base.samples)  # as many probes as the baseline's: the same statistics
        filling = size < full

        def verdict(verdict: ProbeVerdict, reason: str = "", error_class: str | None = None) -> Judgement:
            return Judgement(verdict, p95, threshold, reason, error_class, base.p95_ms, latency_ms=latency)

        checks = (("p95", p95, base.p95_ms),) if filling else (("p95", p95, base.p95_ms), ("p50", p50, base.p50_ms))
        for name, value, ref in checks:
            if ref > 0 and abs(value / ref - 1) > s.tolerance and not (filling and value < ref):
                side = "above" if value > ref else "below"
                return verdict(ProbeVerdict.DEGRADED,
                               f"window {name} {value:.1f} ms is {abs(value / ref - 1):.0%} {side} its baseline "
                               f"{ref:.1f} ms (tolerance ±{s.tolerance:.0%})", "off_baseline")
        tail = list(recent)[-s.trend_window:]
        if len(tail) >= s.trend_window:
            p = mann_kendall_p(tail)
            rise = theil_sen_slope(tail) * s.trend_window
            if p < s.trend_p and rise >= s.trend_min_rise * base.p95_ms:
                return verdict(ProbeVerdict.DEGRADED,
                               f"latency creeping up: +{rise:.1f} ms over the last {len(tail)} probes "
                               f"(Mann-Kendall p={p:.4f} < {s.trend_p:g}; rise ≥ {s.trend_min_rise:.0%} of "
                               f"baseline p95 {base.p95_ms:.1f} ms)", "trend")
        if filling:
            return Judgement(ProbeVerdict.OK, p95, threshold,
                             f"window filling ({size}/{full} probes): judged against its baseline p95 "
                             f"{base.p95_ms:.1f} ms once full (a p95 above {threshold:.1f} ms counts at once)",
                             latency_ms=latency)
        return verdict(ProbeVerdict.OK)
