"""Benchmarks run here only as a smoke test of their interface (a JSON object on the last line);
their figures are not asserted: speed is measured with `python -m bench NAME`, not in tests."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_decide_prints_its_figures_as_json() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "decide", "--iterations", "200"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["instances"] == 64
    assert {"routelens_p50_ms", "routelens_p99_ms", "litellm_p50_ms", "litellm_p99_ms", "ratio_p99"} <= set(figures)
    assert all(figures[k] > 0 for k in ("routelens_p50_ms", "litellm_p99_ms", "ratio_p99"))


def test_unknown_benchmark_is_a_usage_error() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "nope"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "usage" in out.stderr
