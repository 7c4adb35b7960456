"""The ingest benchmarks run end to end on a few traces and print their JSON last line (no timing asserted)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("args", "keys"), [
    (["ingest", "--traces", "1500"], {"traces_per_s", "floor_traces_per_s", "ratio", "emit_p99_us"}),
    (["lookup", "--traces", "3000", "--lookups", "40"], {"traces", "lookup_p99_ms", "agg_24h_ms"}),
])
def test_benchmark_prints_its_figures(args: list[str], keys: set[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert keys <= set(figures) and all(figures[k] > 0 for k in keys)
    if args[0] == "lookup":
        assert figures["traces"] == 3000 and figures["agg_24h_traces"] == 3000
