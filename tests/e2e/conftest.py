"""Real processes on loopback: a simulated fleet and the gateway, each started as ``python -m app``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from app.run.procs import die_with_parent, free_port

ROOT = Path(__file__).resolve().parents[2]


class Proc:
    """A child process whose output is collected; ``wait_for`` blocks until a line appears.

    It never outlives the test run: it gets SIGTERM when the test process dies (started from the main
    thread: the signal follows the thread that started it), and one a test left running (a setup that
    failed between starting it and the ``try`` that stops it) is stopped when the session ends.
    """

    live: weakref.WeakSet[Proc] = weakref.WeakSet()

    def __init__(self, argv: list[str]) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        main = threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True, preexec_fn=die_with_parent() if main else None)
        Proc.live.add(self)
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, prefix: str, timeout_s: float = 60) -> None:
        def seen() -> bool:
            return any(line.startswith(prefix) for line in self.lines) or self.proc.poll() is not None

        with self._cond:
            self._cond.wait_for(seen, timeout_s)
        if not any(line.startswith(prefix) for line in self.lines):
            self.stop()
            raise AssertionError(f"no {prefix!r} from {self.proc.args}:\n{''.join(self.lines)}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


@pytest.fixture(scope="session", autouse=True)
def _no_process_left() -> Iterator[None]:
    """Stop every process a test started and left running (each stops its own on the paths it foresaw)."""
    yield
    for proc in list(Proc.live):
        proc.stop()


@dataclass
class Stack:
    gateway: str
    instances: dict[str, str]  # id -> base URL
    config: Path
    db: Path
    solo_fleet: Proc


def one_instance_config(path: Path, port: int, inst: int, storage: dict[str, object]) -> list[str]:
    """Write a config of one gateway on ``port`` over one instance ``a`` on ``inst`` (probes off); its argv prefix."""
    path.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": storage, "probes": {"enabled": False},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
    }))
    return [sys.executable, "-m", "app", "--config", str(path)]


def _instance(iid: str, model: str, window: int = 32768) -> dict[str, object]:
    return {"id": iid, "model": model, "url": f"http://127.0.0.1:{free_port()}", "context_window": window}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("stack")
    main = [_instance("big-a", "big"), _instance("big-b", "big"),
            _instance("small-a", "small", 8192), _instance("small-b", "small", 8192)]
    solo = [_instance("solo-a", "solo")]
    base = {
        "gateway": {"port": free_port(), "max_attempts": 2},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 20},
        "scrape": {"interval_s": 0.2, "timeout_s": 0.5, "stale_after_s": 30},
        "sim": {"time_scale": 20, "seed": 1},
        "probes": {"enabled": False},  # the probes have e2e tests of their own (test_probes.py)
    }
    cfg = tmp / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({**base, "fleet": {"instances": main + solo}}))
    fleet_cfg = tmp / "fleet.yaml"
    fleet_cfg.write_text(yaml.safe_dump({**base, "fleet": {"instances": main}}))
    solo_cfg = tmp / "solo.yaml"
    solo_cfg.write_text(yaml.safe_dump({**base, "fleet": {"instances": solo}}))

    py = [sys.executable, "-m", "app"]
    fleet = Proc([*py, "sim", "fleet", "--config", str(fleet_cfg)])
    solo_fleet = Proc([*py, "sim", "fleet", "--config", str(solo_cfg)])
    procs = [fleet, solo_fleet]
    try:
        fleet.wait_for("fleet ready")
        solo_fleet.wait_for("fleet ready")
        gateway = Proc([*py, "serve", "--config", str(cfg), "--workers", "1"])  # one router state to read
        procs.append(gateway)
        gateway.wait_for("gateway ready")
        yield Stack(
            gateway=f"http://127.0.0.1:{base['gateway']['port']}",  # type: ignore[index]
            instances={str(i["id"]): str(i["url"]) for i in main + solo},
            config=cfg,
            db=Path(base["storage"]["duckdb_path"]),  # type: ignore[index]
            solo_fleet=solo_fleet,
        )
    finally:
        for p in reversed(procs):
            p.stop()
