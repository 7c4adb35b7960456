"""The observation window's latencies are those of answered requests; failures count in the error share only."""

from __future__ import annotations

from router_core.state.window import ObservationWindow


def test_fast_refusals_are_errors_not_fast_latencies() -> None:
    w = ObservationWindow(span_s=10.0)
    for i in range(20):  # a provider refusing nearly everything at once (429 in ~1 ms), answering 2 slowly
        w.add(float(i) * 0.1, 1.2, ok=False)
    w.add(2.0, 1800.0, ok=True)
    w.add(2.1, 2000.0, ok=True)
    stats = w.stats(3.0)
    assert stats.requests == 22 and stats.error_rate == 20 / 22
    assert stats.p50_ms == 1800.0 and stats.p95_ms == 2000.0  # not 1.2 ms: a p95 <= 1500 ms constraint breaks


def test_nothing_answered_is_no_latency_at_all() -> None:
    w = ObservationWindow(span_s=10.0)
    for i in range(5):
        w.add(float(i), 1.0, ok=False)
    stats = w.stats(5.0)
    assert (stats.requests, stats.error_rate, stats.p50_ms, stats.p95_ms) == (5, 1.0, None, None)
    assert w.stats(100.0).requests == 0  # and the window still forgets
