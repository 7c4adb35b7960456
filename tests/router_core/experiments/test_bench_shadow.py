"""``bench.shadow`` as a smoke test of its interface only: its figures are measured with ``python -m bench shadow``."""

from __future__ import annotations

from bench.shadow import measure


def test_measure_returns_the_figures_of_both_paths_and_the_shadow() -> None:
    figures = measure(requests=60)
    assert figures["requests"] == 60 and figures["shadow_decisions"] == 60
    assert {"p99_ms_without_shadow", "p99_ms_with_shadow", "added_p99_ms", "shadow_decide_p99_ms",
            "shadow_on_path_p99_ms"} <= set(figures)
    assert all(figures[k] > 0 for k in ("p99_ms_without_shadow", "p99_ms_with_shadow", "shadow_decide_p99_ms"))
