"""``routelens drill run SCENARIO.yaml``: fleet + gateway as real processes, traffic, faults, a report.

The fleet (``routelens sim fleet``) and the gateway (``routelens serve``) are started as child
processes on free loopback ports with a configuration generated from the scenario; traffic and
the fault timeline run in this process. The report is written as JSON next to the generated
configuration, the simulator's fault log, the trace database and one line per request
(``requests.jsonl``: class, query hash, timing, instance, grade), and summarised on stdout.
Last, every decision of the drill is re-decided under its own stored policy (``replay --verify``,
written to ``verify.json``); the command exits 1 when one comes out different.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

from app.cli._common import BadInput, err, fail
from app.run.procs import Child, app_command, free_ports, wait_http
from schemas.fleet import EXTERNAL

__all__ = ["register"]


def _wait_scraped(gateway: str, timeout_s: float = 15.0) -> bool:
    """Wait until the gateway has scraped every instance once (routing on real state; an external one never is)."""
    from ingest import HttpTraceStore, SinkError  # the server's one client; here, not at `routelens --help`

    api = HttpTraceStore(gateway, timeout_s=2)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = api.get_json("/v1/router/state")
            if all(s.get("age_s") is not None or s.get("engine") == EXTERNAL for s in state["instances"]):
                return True
        except (SinkError, KeyError):
            pass
        time.sleep(0.1)
    return False


def _read_fault_log(path: Path) -> list[dict[str, object]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _not_started(what: str, child: Child) -> int:
    fail(f"the {what} did not start; its last output:")
    err.print(child.tail() or "(none)", markup=False, highlight=False)
    return 1


def _run(args: argparse.Namespace) -> int:
    from sim.drill import build_report, format_summary
    from sim.drill_run import execute_drill
    from sim.scenarios import load_scenario

    if args.speed <= 0:
        raise BadInput(f"--speed must be positive, not {args.speed:g}")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise BadInput(f"--out {args.out}: exists and is not a directory")
    try:
        scenario = load_scenario(args.scenario)
    except OSError as exc:
        raise BadInput(f"{args.scenario}: cannot read the scenario: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:  # a ConfigError (file, line and field) is main's too: exit 2 with its message
        raise BadInput(f"{args.scenario}: not UTF-8 text (byte {exc.start}): a scenario is YAML") from exc
    scenario = scenario.scaled(args.speed)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path(".routelens/drills") / f"{scenario.name}-{stamp}"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a parent is a file, or cannot be written
        where = f"--out {out}" if args.out else str(out)
        raise BadInput(f"{where}: cannot create the directory: {exc.strerror or exc}") from exc
    # absolute: the paths written into out/config.yaml are read against that file's folder, not this one
    out = out.resolve()
    config = scenario.config(0)
    # an external instance is a real server: it keeps its url, and the simulated fleet leaves it out
    simulated = [spec for spec in config.fleet.instances if spec.engine != EXTERNAL]
    *ports, gw_port = free_ports(len(simulated) + 1)
    local = {spec.id: f"http://127.0.0.1:{port}" for spec, port in zip(simulated, ports, strict=True)}
    instances = [spec.model_copy(update={"url": local[spec.id]}) if spec.id in local else spec
                 for spec in config.fleet.instances]
    config = config.model_copy(update={
        "fleet": config.fleet.model_copy(update={"instances": instances}),
        "gateway": config.gateway.model_copy(update={"host": "127.0.0.1", "port": gw_port}),
        "storage": config.storage.model_copy(update={"duckdb_path": str(out / "traces.duckdb")}),
    })
    cfg_path = out / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    fault_log = out / "faults.jsonl"
    fault_log.unlink(missing_ok=True)
    py, env = app_command({**os.environ, "PYTHONUNBUFFERED": "1"})
    py = [*py, "--config", str(cfg_path)]
    gateway = f"http://127.0.0.1:{gw_port}"
    children: list[Child] = []
    try:
        fleet = Child("sim", [*py, "sim", "fleet", "--fault-log", str(fault_log)], env, "fleet ready",
                      echo=args.verbose)
        children.append(fleet)
        if not fleet.wait_ready(60):
            return _not_started("simulated fleet", fleet)
        # one gateway process: it shares the cores with the simulated fleet, and one router state is read
        serve = Child("gateway", [*py, "serve", "--workers", "1"], env, "gateway ready", echo=args.verbose)
        children.append(serve)
        if not serve.wait_ready(60) or not wait_http(f"{gateway}/health", 10, serve.alive):
            return _not_started("gateway", serve)
        if not _wait_scraped(gateway):
            err.print("[yellow]warning:[/yellow] the gateway has not scraped every instance yet; going on")
        external = [spec.id for spec in instances if spec.id not in local]
        print(f"drill {scenario.name}: fleet of {len(instances)} and gateway {gateway} up; "
              f"running {scenario.duration_s:g} s", flush=True)
        if external:
            print(f"not simulated (engine external, real servers): {', '.join(external)}", flush=True)
        run = asyncio.run(execute_drill(scenario, gateway, {s.id: s.url for s in instances}))
    finally:
        for child in reversed(children):
            child.stop()
    with (out / "requests.jsonl").open("w", encoding="utf-8") as f:  # classes and hashes only, never text
        f.writelines(json.dumps(dataclasses.asdict(r)) + "\n" for r in run.results)
    report = build_report(run, _read_fault_log(fault_log), instances, speed=args.speed)
    (out / "report.json").write_text(report.model_dump_json(indent=2), encoding="utf-8")
    print(format_summary(report))
    print(f"report: {out / 'report.json'}")
    return _verify(out / "traces.duckdb", out / "verify.json", answered=len(run.results))


def _verify(db: Path, path: Path, *, answered: int) -> int:
    """Every decision of the drill re-decided under its own stored policy; 1 when one comes out different.

    No trace file after requests were sent is 1 too: the drill's decisions were not stored where it
    reads them, so none was verified.
    """
    from app.experiments.verify import summary_line, verify_file

    if not db.exists():
        if answered:
            err.print(f"[red]error:[/red] no trace file at {db} after {answered} requests: nothing was verified")
            return 1
        err.print("[yellow]warning:[/yellow] no trace file: nothing to verify")
        return 0
    report = verify_file(db, datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC))
    path.write_text(report.model_dump_json(indent=2), encoding="utf-8")
    print(f"replay --verify: {summary_line(report)}")
    print(f"verify: {path}")
    return 1 if report.mismatched else 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``drill run``."""
    drill = sub.add_parser("drill", parents=[common], help="fault drills against a simulated fleet").add_subparsers(
        dest="drill_command", required=True)
    run = drill.add_parser("run", parents=[common], help="run one scenario and write its report")
    run.add_argument("scenario", help="scenario YAML (see sim/scenarios/)")
    run.add_argument("--out", help="directory for the report, config, fault log and traces")
    run.add_argument("--speed", type=float, default=1.0, help="run the scenario this many times faster")
    run.add_argument("--verbose", action="store_true", help="relay the fleet's and the gateway's output")
    run.set_defaults(func=_run)
