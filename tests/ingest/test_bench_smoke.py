"""The ingest benchmarks run end to end on a few traces and print their JSON last line (no timing asserted)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.lookup import generate, holds

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


def test_lookup_reuses_a_kept_file_only_for_the_same_traces_and_span(tmp_path: Path) -> None:
    path = tmp_path / "kept.duckdb"
    generate(path, 500, 24.0)
    assert holds(path, 500, 24.0)
    assert not holds(path, 500, 12.0) and not holds(path, 400, 24.0)
    assert not holds(tmp_path / "absent.duckdb", 500, 24.0)
