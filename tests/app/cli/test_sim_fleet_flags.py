"""``sim fleet`` flags that the mode in use would not apply: refused in one line (exit 2), or said aloud.

The audit's defect: ``sim fleet --config C --base-port 18250`` served C's instances on the ports of
their URLs and said nothing of ``--base-port``. Found beside it: ``--time-scale 0`` was read as 1
with ``--instances`` and, with a config, divided every simulated sleep by zero (each request a 500);
``--config C`` named with ``--instances`` was not read, silently.

Each case runs ``python -m app sim fleet`` as a process: before the fix it served (until killed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.run.procs import free_port

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e
_SERVED_FOR_S = 30  # a refusal comes at once; a fleet that starts serves until stopped


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def _refused(*argv: str, cwd: Path) -> str:
    """The one ``error:`` line of a ``sim fleet`` refused at once with exit 2 (a fleet that starts fails the test)."""
    proc = subprocess.Popen([sys.executable, "-m", "app", *argv], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=_SERVED_FOR_S)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"not refused: still serving after {_SERVED_FOR_S} s\n{out}{err}")
    assert proc.returncode == 2, (out, err)
    assert "fleet ready" not in out, out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "pydantic" not in err, err
    return lines[0]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A config declaring one simulated instance on a free port."""
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(yaml.safe_dump({"fleet": {"instances": [
        {"id": "a", "model": "m", "url": f"http://127.0.0.1:{free_port()}"}]}}))
    return cfg


def test_base_port_without_instances_is_refused_naming_why_and_what_to_do(config: Path, tmp_path: Path) -> None:
    line = _refused("sim", "fleet", "--config", str(config), "--base-port", str(free_port()), "--zero-delay",
                    cwd=tmp_path)
    assert line == (f"error: --base-port applies only with --instances: the instances of {config} listen on the "
                    "ports of their URLs (fleet.instances); change those, or add --instances N for the built-in mix")


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
@pytest.mark.parametrize("mode", ["instances", "config"])
def test_time_scale_must_be_above_zero_in_either_mode(config: Path, tmp_path: Path, mode: str, value: str) -> None:
    source = ["--instances", "1", "--base-port", "0"] if mode == "instances" else ["--config", str(config)]
    line = _refused("sim", "fleet", *source, f"--time-scale={value}", cwd=tmp_path)
    assert line.startswith(f"error: --time-scale must be > 0 (model time runs this many times faster), not {value}")


def test_a_config_named_beside_instances_is_said_not_read(config: Path, tmp_path: Path) -> None:
    """``--instances`` wins (scripts pass a config for other commands); a warning says the config is not read."""
    proc = subprocess.Popen([sys.executable, "-m", "app", "--config", str(config), "sim", "fleet", "--instances", "1",
                             "--base-port", "0", "--zero-delay"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        served = [proc.stdout.readline().strip() for _ in range(2)]
        assert served[-1] == "fleet ready" and served[0].startswith("sim instance v4-32k-0 "), served
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert (f"warning: --instances 1 serves the built-in model mix: the fleet of {config} (--config) "
            "is not read") in err, err


def test_help_says_base_port_is_for_instances_only(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "app", "sim", "fleet", "--help"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=60, check=True)
    text = " ".join(done.stdout.split())
    assert "--base-port BASE_PORT with --instances only: port of instance 0" in text, text
    assert "a config's instances listen on the ports of their URLs" in text, text
