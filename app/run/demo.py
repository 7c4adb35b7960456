"""``routelens demo``: simulated fleet, gateway, app and a scripted day of traffic and faults, until Ctrl-C.

The day (``app/run/demo_day.yaml``, a drill file in the package; ``--script`` another) is played in a loop: a loaded
fleet, KV pressure on one instance, a semantic drift on another, a crash, two experiment arms and a
shadow, feedback marking misroutes. Each event is printed as the gateway sees it, with the page of
the app that shows it (:mod:`app.run.narrator`); the configuration is paced for a day of minutes
(:func:`app.run.demo_day.demo_config`), ``--speed`` times faster again. The day begins once the
gateway routes without waiting: its semantic intents fitted (:func:`app.run.demo_day.wait_for_intents`);
``--duration`` counts from then.

Ports come from the configuration; any that is taken is replaced by a free one (and said so), and
the derived configuration is written next to the trace file so the children share it.

One demo per data folder: the demo holds an exclusive lock on ``demo.lock`` there for as long as
it runs (the kernel drops it when the process ends, ``kill -9`` included), and a second demo on the
same folder refuses to start with a message naming the first one's pid, instead of writing the same
configuration and trace file (the second gateway could never take the DuckDB lock).
Children end with the demo however it ends (see :mod:`app.run.procs`). Once they have, the last
minutes of decisions are re-decided under their own stored policy (``replay --verify``) and the
result is printed, with the command that verifies the whole run.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import IO
from urllib.parse import urlsplit

import yaml

from app.run.demo_day import DEFAULT_SCRIPT, DayThread, demo_config, load_day, wait_for_intents
from app.run.logs import DEFAULT_LOG, LogSettings, configure
from app.run.narrator import Narrator
from app.run.procs import Child, app_command, free_port, port_is_free, wait_http
from schemas import RoutelensError
from schemas.config import RouteLensConfig
from sim.day import fleet_instance_of
from sim.scenarios import Scenario
from sim.traffic import TrafficResult

VERIFY_LAST = timedelta(minutes=2)  # the decisions verified at the end: Ctrl-C stays quick however long it ran

__all__ = ["routelens_command", "run_demo"]


def routelens_command(
    *, argv0: str | None = None, executable: str | None = None, path: str | None = None, cwd: Path | None = None
) -> str:
    """Return how to type ``routelens`` in the shell that started us, for the lines the demo prints.

    ``make demo`` runs ``.venv/bin/routelens`` from a shell without the virtualenv on ``PATH``, so a
    bare ``routelens`` would not be found. The script is the one we were started as, or the one
    installed next to our interpreter; it is printed as ``routelens`` when ``PATH`` finds that very
    file, else as a path (relative when under ``cwd``). Without a script: ``PYTHON -m app``.

    Args:
        argv0: Our ``sys.argv[0]`` (default: the real one).
        executable: Our interpreter (default: ``sys.executable``).
        path: The ``PATH`` to search (default: ``$PATH``).
        cwd: The directory the printed command is typed in (default: the current one).
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    cwd = Path.cwd() if cwd is None else cwd
    scripts = [Path(argv0)] if Path(argv0).name == "routelens" else []
    scripts.append(Path(executable).with_name("routelens"))  # not resolved: a venv's python is a symlink
    script = next((s for s in scripts if s.is_file() and os.access(s, os.X_OK)), None)
    if script is None:
        return f"{shlex.quote(executable)} -m app"
    script = script.absolute()
    found = shutil.which("routelens", path=os.environ.get("PATH", "") if path is None else path)
    if found and os.path.samefile(found, script):
        return "routelens"
    shown = os.path.relpath(script, cwd) if script.is_relative_to(cwd) else str(script)
    return shlex.quote(shown if os.sep in shown else f".{os.sep}{shown}")


def _with_free_ports(config: RouteLensConfig) -> RouteLensConfig:
    def pick(host: str, port: int, what: str) -> int:
        if port_is_free(host, port):
            return port
        new = free_port(host)
        print(f"port {port} ({what}) is taken; using {new}", flush=True)
        return new

    instances = []
    for spec in config.fleet.instances:
        url = urlsplit(spec.url)
        port = pick(url.hostname or "127.0.0.1", url.port or 80, spec.id)
        instances.append(spec.model_copy(update={"url": f"{url.scheme}://{url.hostname}:{port}"}))
    gw = config.gateway.model_copy(update={"port": pick(config.gateway.host, config.gateway.port, "gateway")})
    ap = config.app.model_copy(update={"port": pick(config.app.host, config.app.port, "app")})
    fleet = config.fleet.model_copy(update={"instances": instances})
    return config.model_copy(update={"fleet": fleet, "gateway": gw, "app": ap})


def _lock_folder(work: Path) -> IO[str] | None:
    """Take ``work/demo.lock`` (held until the returned file is closed or we exit); None when taken."""
    handle = (work / "demo.lock").open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def _holder(work: Path) -> str:
    try:
        return (work / "demo.lock").read_text(encoding="utf-8").strip() or "?"
    except OSError:
        return "?"


def _verify(db: Path, started: datetime) -> None:
    """The demo's last minutes of decisions, re-decided under their own stored policy (``replay --verify``)."""
    from app.experiments.verify import summary_line, verify_file

    until = datetime.now(UTC)
    since = max(started, until - VERIFY_LAST)
    try:
        report = verify_file(db, since, until)
    except Exception as exc:  # noqa: BLE001  (the demo has stopped either way; say why nothing was verified)
        print(f"replay --verify: not run ({type(exc).__name__}: {exc})", flush=True)
        return
    print(f"replay --verify (the last {int((until - since).total_seconds())} s): {summary_line(report)}", flush=True)
    print(f"  the whole run: {routelens_command()} replay --verify --since {started.isoformat()} "
          f"--until {until.isoformat()} --db {db}", flush=True)


def run_demo(
    config: RouteLensConfig, *, with_app: bool = True, duration_s: float | None = None, rps: float | None = None,
    speed: float = 1.0, script: Path = DEFAULT_SCRIPT, log: LogSettings = DEFAULT_LOG,
) -> int:
    """Run the demo; return 0 after a clean stop, 1 when a part failed to start, 2 for a bad script.

    ``duration_s``: stop this many seconds after the day began (None: when stopped). ``log``: how much
    the demo and the processes it starts log, and in what form (:mod:`app.run.logs`).
    """
    configure(log, "demo")
    try:
        day = load_day(script, speed, rps)
        fleet_instance_of(day, [spec.id for spec in config.fleet.instances])  # before anything starts
    except (OSError, RoutelensError, ValueError) as exc:
        print(f"error: the demo's script {script}: {exc}", file=sys.stderr)
        return 2
    cfg = demo_config(config, speed)
    work = Path(cfg.storage.duckdb_path).parent
    work.mkdir(parents=True, exist_ok=True)
    lock = _lock_folder(work)
    if lock is None:
        print(f"error: another routelens demo (pid {_holder(work)}) is running on {work}; stop it first, "
              "or give this one a folder of its own (--data-dir DIR)", file=sys.stderr)
        return 1
    cfg = _with_free_ports(cfg)  # once the folder is ours: a second demo says why it cannot run, nothing else
    cfg_path = work / "demo-config.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    py, env = app_command({**os.environ, "PYTHONUNBUFFERED": "1", **log.env()})  # the gateway logs as we do
    py = [*py, "--config", str(cfg_path)]
    gateway = f"http://{cfg.gateway.host}:{cfg.gateway.port}"
    app_url = f"http://{cfg.app.host}:{cfg.app.port}"
    children: list[Child] = []
    stop = threading.Event()
    started, verify = datetime.now(UTC), False
    player: DayThread | None = None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # kill -9 is the children's own business
        signal.signal(sig, on_signal)
    try:
        fleet = Child("sim", [*py, "sim", "fleet"], env, "fleet ready")
        children.append(fleet)
        if not fleet.wait_ready(60):
            print(f"error: the simulated fleet did not start; its last output:\n{fleet.tail()}", file=sys.stderr)
            return 1
        # one gateway process: it shares the cores with the simulated fleet, and one router state is read
        serve = Child("gateway", [*py, "serve", "--workers", "1"], env, "gateway ready", echo=True)
        children.append(serve)
        if not serve.wait_ready(60):
            print("error: the gateway did not start", file=sys.stderr)
            return 1
        if with_app:
            # SIGKILL when the demo dies unstopped: the app keeps no state, and Streamlit's own shutdown on
            # SIGTERM took over 15 s once under load (tests/e2e/test_demo_kill.py)
            app = Child("app", [*py, "app", "--api", gateway, "--port", str(cfg.app.port)], env, None,
                        death_signal=signal.SIGKILL)
            children.append(app)
            if not wait_http(f"{app_url}/_stcore/health", 90, app.alive):
                print("error: the app did not start", file=sys.stderr)
                return 1
        # the day's first requests for auto would wait for the intents' first fit, then all come at once
        if not wait_for_intents(gateway, stop=stop, say=lambda line: print(line, flush=True), alive=serve.alive):
            return 0 if stop.is_set() else 1

        out = _HeldLines()
        curve = day.traffic.curve
        peak_s = max((day.duration_s * i / 100 for i in range(100)), key=curve.rate)
        narrator = Narrator(cfg, gateway, app_url if with_app else None, speed=speed, day_s=day.duration_s,
                            peak_s=peak_s, say=out.say)
        first_id: list[str] = []

        def on_result(result: TrafficResult) -> None:
            if result.request_id and not first_id:
                first_id.append(result.request_id)
            narrator.on_result(result)

        player = DayThread(day, cfg, gateway, on_result=on_result, on_inject=narrator.on_inject,
                           on_day=narrator.on_day)
        player.start()
        began = time.monotonic()  # --duration counts from here: what came before is the parts starting
        # watching from the day's first second: what happens before the banner is printed after it
        threading.Thread(target=narrator.watch, args=(stop,), daemon=True).start()
        while not first_id and not stop.wait(0.2):
            pass
        _banner(cfg, gateway, app_url if with_app else None, first_id[0] if first_id else None, day, speed)
        print("Press Ctrl-C to stop.", flush=True)
        out.release()
        stop.wait(None if duration_s is None else max(0.0, duration_s - (time.monotonic() - began)))
        stop.set()
        player.stop()
        verify = True
        return 0
    finally:
        stop.set()
        if player is not None:
            player.stop(5)
        for child in reversed(children):
            child.stop()
        if verify:  # the trace file is free once the gateway has stopped
            _verify(Path(cfg.storage.duckdb_path), started)
        lock.close()
        print("demo stopped", flush=True)


class _HeldLines:
    """The narrator's lines, held back until the banner is out, then printed as they come."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[str] | None = []

    def say(self, line: str) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(line)
                return
        print(line, flush=True)

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held or [], None
        for line in held:
            print(line, flush=True)


def _banner(cfg: RouteLensConfig, gateway: str, app_url: str | None, rid: str | None, day: Scenario,
            speed: float) -> None:
    print("\nRouteLens demo is running", flush=True)
    for spec in cfg.fleet.instances:
        print(f"  instance {spec.id:<12} {spec.url}")
    print(f"  gateway  {gateway}   (OpenAI base_url {gateway}/v1, model \"auto\")")
    if app_url is not None:
        print(f"  app      {app_url}")
    if rid is not None:
        print(f"  example request_id: {rid}")
        print(f"    {routelens_command()} trace {rid} --api {gateway}")
        if app_url is not None:
            print(f"    {app_url}/trace?request_id={rid}")
    pace = "" if speed == 1 else f" (x{speed:g})"
    print(f"  day      {day.name}: {day.description}; {day.duration_s:g} s a day{pace}, played until stopped; "
          f"each event below with the page that shows it")
    if cfg.probes.enabled:
        print(f"  probes   every {cfg.probes.interval_s:g} s per instance ({probe_kinds(cfg)}: the demo's pace; "
              f"serve keeps the configured interval); alerts at {gateway}/v1/alerts"
              + (f", page {app_url}/probes" if app_url is not None else ""))


def probe_kinds(cfg: RouteLensConfig) -> str:
    """The probe kinds the demo's prober runs, as its banner says them (the semantic one off without its model)."""
    from probes.embedder import available  # its model's modules are looked up, not imported

    kinds = [k.value for k in cfg.probes.kinds]
    missing = available() if "semantic" in kinds else None
    shown = ", ".join(k for k in kinds if k != "semantic" or missing is None)
    return shown + (f"; semantic off: the embedding model is {missing}" if missing else "")
