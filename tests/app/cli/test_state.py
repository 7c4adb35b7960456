import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.contracts import contract

ROOT = Path(__file__).resolve().parents[3]
CONTRACTS = contract("prometheus")


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "state", "parse-metrics", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("name", "expected"), [
    ("datadog_vllm_v0_opt125m_metrics.txt", {"engine": "vllm", "queue": 0.0, "running": 0.0, "kv_cache_usage": 0.0,
                                             "num_gpu_blocks": 7281, "block_size": 16}),
    ("datadog_sglang_opt125m_metrics.txt", {"engine": "sglang", "queue": 0.0, "running": 0.0, "kv_cache_usage": 0.25}),
])
def test_real_scrapes(name: str, expected: dict[str, object]) -> None:
    out = run(str(CONTRACTS / name))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout).items() >= expected.items()


def test_current_vllm_names_from_stdin() -> None:
    text = ('vllm:num_requests_waiting{model_name="m",engine="0"} 3\n'
            'vllm:num_requests_running{model_name="m",engine="0"} 2\n'
            'vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.42\n')
    out = run("-", stdin=text)
    assert json.loads(out.stdout) == {"engine": "vllm", "queue": 3.0, "running": 2.0, "kv_cache_usage": 0.42,
                                      "warmup_progress": None}


@pytest.mark.parametrize("text", ["not metrics at all {{{", "# only a comment\n", ""])
def test_unparseable_input_exits_2_with_a_message(text: str) -> None:
    out = run("-", stdin=text)
    assert out.returncode == 2 and "error:" in out.stderr and out.stdout == ""


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    out = run(str(tmp_path / "nope.txt"))
    assert out.returncode == 2 and "cannot read" in out.stderr


def test_sglang_has_no_cache_config_so_no_block_keys() -> None:
    out = run(str(CONTRACTS / "datadog_sglang_opt125m_metrics.txt"))
    assert "num_gpu_blocks" not in json.loads(out.stdout)


def test_tgi_and_out_of_range_adjustments_are_reported() -> None:
    out = run("-", stdin="tgi_queue_size 3\ntgi_batch_current_size -2\n")
    assert json.loads(out.stdout) == {"engine": "tgi", "queue": 3.0, "running": None, "kv_cache_usage": None,
                                      "warmup_progress": None, "adjustments": ["running=-2 refused (negative)"]}


def test_invalid_utf8_exits_2_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b'vllm:num_requests_waiting{model_name="\xff"} 1\n')
    out = run(str(bad))
    assert out.returncode == 2 and "decode: body is not UTF-8" in out.stderr and out.stdout == ""
