"""A simulated fleet leaves out ``engine: external`` instances: the real provider holds their port."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.config import RouteLensConfig
from schemas.yamlconf import parse_yaml_model
from sim.fleet import start_fleet

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def provider_port() -> Iterator[int]:
    """A port a running provider listens on (a bound, listening socket)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def fleet_yaml(port: int, *, local: bool = True) -> str:
    lines = ["fleet:", "  instances:"]
    if local:
        lines.append('    - {id: local-a, model: big-model, url: "http://127.0.0.1:0"}')
    lines += [f'    - {{id: hosted-a, model: big-model, engine: external, url: "http://127.0.0.1:{port}"}}',
              f'    - {{id: hosted-b, model: prov-large, engine: external, url: "http://127.0.0.1:{port}"}}',
              "sim: {zero_delay: true}"]
    return "\n".join(lines) + "\n"


def test_start_fleet_serves_only_the_simulated_instances(provider_port: int) -> None:
    async def scenario() -> list[str]:
        handle = await start_fleet(parse_yaml_model(RouteLensConfig, fleet_yaml(provider_port)))
        try:
            return sorted(handle.urls)
        finally:
            await handle.close()

    assert asyncio.run(scenario()) == ["local-a"]  # no "port in use" for the provider's port


@pytest.mark.e2e
def test_sim_fleet_says_which_instances_it_does_not_simulate(tmp_path: Path, provider_port: int) -> None:
    config = tmp_path / "routelens.yaml"
    config.write_text(fleet_yaml(provider_port), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "app", "sim", "fleet", "--config", str(config)], cwd=REPO_ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(30, proc.kill)
    watchdog.start()
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(4)]
        with urllib.request.urlopen(f"{lines[0].split()[-1]}/health", timeout=5) as resp:  # served (and signals set)
            assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert lines[0].startswith("sim instance local-a big-model http://127.0.0.1:"), lines
    assert lines[1] == f"not simulated hosted-a big-model http://127.0.0.1:{provider_port}: engine external " \
                       "(a real server)"
    assert lines[2].startswith("not simulated hosted-b prov-large") and lines[3] == "fleet ready"
    assert proc.returncode == 0, err


def test_sim_fleet_of_only_external_instances_refuses_saying_why(tmp_path: Path, provider_port: int) -> None:
    config = tmp_path / "routelens.yaml"
    config.write_text(fleet_yaml(provider_port, local=False), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "app", "sim", "fleet", "--config", str(config)], cwd=REPO_ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "nothing to simulate" in done.stderr and "engine: external" in done.stderr
