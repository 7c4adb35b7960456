"""How every number in the app reads: one formatter per unit, ``value / limit``, counts with plurals.

Pure (stdlib only), below both the pages and the terminal: :mod:`app.violation_text` reads violations
through it too. A missing value reads :data:`DASH`, never ``None``; shares (0-1) read as
percentages, latencies as whole milliseconds (one decimal below 10 ms), rates in requests/s,
and cost in the unit the configuration names (``app.cost_unit``).
"""

from __future__ import annotations

import math
from typing import Literal

__all__ = [
    "DASH", "METRIC_NAMES", "METRIC_UNITS", "Unit", "count", "fmt", "fmt_apart", "fmt_delta", "metric_unit",
    "over_limit", "plural",
]

Unit = Literal["%", "ms", "s", "req/s", "requests", "cost", "score", "n"]
DASH = "—"
# Instance metrics (schemas.config.decision.Metric and the snapshot's gauges) -> their unit.
METRIC_UNITS: dict[str, Unit] = {
    "kv_cache_usage": "%", "queue": "requests", "running": "requests", "error_rate": "%",
    "warmup_progress": "%", "p50_latency_ms": "ms", "p95_latency_ms": "ms", "ttft_p95_ms": "ms",
    "e2e_p95_ms": "ms", "state_age_s": "s", "budget_use": "%",
}
# The same metrics as a tile or an axis names them.
METRIC_NAMES: dict[str, str] = {
    "kv_cache_usage": "KV-cache", "queue": "queue", "running": "running", "error_rate": "errors",
    "warmup_progress": "warm-up", "p50_latency_ms": "p50 latency", "p95_latency_ms": "p95 latency",
    "ttft_p95_ms": "p95 TTFT", "e2e_p95_ms": "p95 e2e",
}


def metric_unit(metric: str) -> Unit:
    """The unit of an instance metric (``n``, a plain number, for one not listed)."""
    return METRIC_UNITS.get(metric, "n")


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value: float | None, unit: Unit, cost_unit: str = "cost units") -> str:
    """``value`` as read in ``unit``: ``12.5%``, ``840 ms``, ``3.2 s``, ``2.5 requests/s``, ``0.42 credits``.

    Args:
        value: The number (a share 0-1 for ``%``); None or NaN reads :data:`DASH`.
        unit: Its unit.
        cost_unit: The name of one cost unit (``app.cost_unit``), for ``cost``.
    """
    if _missing(value):
        return DASH
    assert value is not None
    v = float(value)
    if unit == "%":
        return f"{v:.0%}" if v == 0 or abs(v) >= 0.1 or v * 100 == round(v * 100) else f"{v:.1%}"
    if unit == "ms":
        return f"{v:,.1f} ms" if abs(v) < 10 and v != round(v) else f"{v:,.0f} ms"
    if unit == "s":
        return f"{v:,.1f} s" if abs(v) < 100 else f"{v:,.0f} s"
    if unit == "req/s":
        return f"{v:,.2g} requests/s" if abs(v) < 10 else f"{v:,.0f} requests/s"
    if unit == "requests":
        return count(round(v), "request") if v == round(v) else f"{v:,.1f} requests"
    if unit == "cost":
        return f"{v:,.2f} {cost_unit}" if abs(v) >= 0.01 or v == 0 else f"{v:.2g} {cost_unit}"
    if unit == "score":
        return f"{v:.3f}"
    return f"{v:,.0f}" if v == round(v) else f"{v:,.1f}" if abs(v) >= 1 else f"{v:.2g}"


def fmt_apart(a: float | None, b: float | None, unit: Unit,
              cost_unit: str = "cost units") -> tuple[str, str]:
    """``a`` and ``b`` as :func:`fmt` reads them, never two different numbers alike.

    Where :func:`fmt`'s rounding would read them the same, both get the fewest decimals that
    tell them apart: ``85.1% > 85.0%``, not ``85% > 85%``.
    """
    pair = fmt(a, unit, cost_unit), fmt(b, unit, cost_unit)
    if pair[0] != pair[1] or _missing(a) or _missing(b) or a == b:
        return pair
    assert a is not None and b is not None
    scale = 100.0 if unit == "%" else 1.0
    suffix = _SUFFIX.get(unit, f" {cost_unit}" if unit == "cost" else "")
    for digits in range(1, 10):
        x, y = f"{a * scale:,.{digits}f}", f"{b * scale:,.{digits}f}"
        if x != y:
            return x + suffix, y + suffix
    return pair


_SUFFIX: dict[str, str] = {"%": "%", "ms": " ms", "s": " s", "req/s": " requests/s", "requests": " requests"}


def fmt_delta(delta: float | None, unit: Unit, cost_unit: str = "cost units") -> str | None:
    """A change as read beside its figure: ``+1.2 pp`` for shares, ``−40 ms``; None without one."""
    if _missing(delta):
        return None
    assert delta is not None
    sign = "+" if delta >= 0 else "−"
    if unit == "%":
        return f"{sign}{abs(delta) * 100:.1f} pp"
    if unit == "requests":
        return f"{sign}{abs(delta):,.0f}"
    return sign + fmt(abs(delta), unit, cost_unit)


def over_limit(value: float | None, limit: float | None, unit: Unit, cost_unit: str = "cost units") -> str:
    """``value / limit`` in one unit: ``92% / 85%``, ``12 / 10 requests``; just the value without a limit."""
    if limit is None or _missing(limit):
        return fmt(value, unit, cost_unit)
    if unit == "requests":
        shown = DASH if _missing(value) else fmt(value, "n")
        return f"{shown} / {fmt(limit, 'n')} requests"
    if unit == "cost":
        return f"{fmt(value, 'n')} / {fmt(limit, 'cost', cost_unit)}"
    return f"{fmt(value, unit)} / {fmt(limit, unit)}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``word`` or its plural for ``n`` (``many``, else ``word + "s"``), without the number."""
    return word if n == 1 else (many or word + "s")


def count(n: int, word: str, many: str | None = None) -> str:
    """``1 decision``, ``2,400 decisions``."""
    return f"{n:,} {plural(n, word, many)}"
