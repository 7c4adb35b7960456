"""Benchmarks run here only as a smoke test of their interface (a JSON object on the last line);
their figures are not asserted: speed is measured with `python -m bench NAME`, not in tests."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.lookup import generate, holds

ROOT = Path(__file__).resolve().parents[2]


def figures_of(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


@pytest.mark.slow
def test_bench_decide_prints_its_figures_as_json() -> None:
    figures = figures_of("decide", "--iterations", "200")
    assert figures["instances"] == 64
    assert {"routelens_p50_ms", "routelens_p99_ms", "litellm_p50_ms", "litellm_p99_ms", "ratio_p99"} <= set(figures)
    assert all(figures[k] > 0 for k in ("routelens_p50_ms", "litellm_p99_ms", "ratio_p99"))


@pytest.mark.slow
def test_bench_sim_prints_instances_and_rps() -> None:
    figures = figures_of("sim", "--requests", "320", "--concurrency", "8")
    assert figures["instances"] == 16 and figures["rps"] > 0
    assert figures["requests"] == 320 and figures["errors"] == 0


@pytest.mark.slow
def test_bench_ingest_prints_rates_and_emit_latency() -> None:
    figures = figures_of("ingest", "--traces", "1500")
    keys = {"traces_per_s", "floor_traces_per_s", "ratio", "emit_p99_us"}
    assert keys <= set(figures) and all(figures[k] > 0 for k in keys) and figures["traces"] == 1500


@pytest.mark.slow
def test_bench_store_check_prints_both_ways_per_size() -> None:
    figures = figures_of("store_check", "--sizes", "24,100", "--rounds", "1")
    assert set(figures["sizes"]) == {"24", "100"} and figures["trace_bytes"] > 0
    for size in figures["sizes"].values():
        assert size["pydantic_us_per_trace"] > 0 and size["columns_us_per_trace"] > 0 and size["ratio"] > 0


@pytest.mark.slow
def test_bench_lookup_prints_lookup_and_aggregate_times() -> None:
    figures = figures_of("lookup", "--traces", "3000", "--lookups", "40")
    keys = {"traces", "lookup_p99_ms", "agg_24h_ms"}
    assert keys <= set(figures) and all(figures[k] > 0 for k in keys)
    assert figures["traces"] == 3000 and figures["agg_24h_traces"] == 3000


def test_lookup_reuses_a_kept_file_only_for_the_same_traces_and_span(tmp_path: Path) -> None:
    path = tmp_path / "kept.duckdb"
    generate(path, 500, 24.0)
    assert holds(path, 500, 24.0)
    assert not holds(path, 500, 12.0) and not holds(path, 400, 24.0)
    assert not holds(tmp_path / "absent.duckdb", 500, 24.0)


def test_unknown_benchmark_is_a_usage_error() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "nope"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "usage" in out.stderr
