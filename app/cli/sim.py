"""``routelens sim ...``: the simulated fleet, fault injection and traffic.

- ``sim fleet [--config F | --instances N --base-port P] [--zero-delay] [--fault-log F] [--scenario F]``
- ``sim fault http://127.0.0.1:PORT KIND [--rate R] [--factor K] [--duration S] [--lag S]``
- ``sim faults http://127.0.0.1:PORT [--clear]``: list (or end) an instance's faults
- ``sim traffic [--api URL] --duration S --rps R [--curve steady|diurnal|surge] ...``
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from app.cli._common import api_url, config_of, fail
from sim.faults import FaultKind

__all__ = ["register"]

KINDS = [kind.value for kind in FaultKind]


def _fleet(args: argparse.Namespace) -> int:
    from sim.behaviour import builtin_config
    from sim.fleet import run_fleet

    if args.instances is not None:
        try:
            config = builtin_config(args.instances, args.base_port, zero_delay=args.zero_delay,
                                    time_scale=args.time_scale or 1.0, seed=args.seed or 0)
        except ValueError as exc:
            fail(f"{exc}")
            return 2
    else:
        config = config_of(args)
        knobs = {k: v for k, v in (("zero_delay", args.zero_delay or None), ("time_scale", args.time_scale),
                                   ("seed", args.seed)) if v is not None}
        config = config.model_copy(update={"sim": config.sim.model_copy(update=knobs)})
    timeline = None
    if args.scenario:
        from sim.fleet import fleet_timeline
        from sim.scenarios import load_scenario

        try:
            timeline = fleet_timeline(load_scenario(args.scenario), config)
        except (OSError, ValueError) as exc:
            fail(f"{exc}")
            return 2
    run_fleet(config, fault_log=args.fault_log, timeline=timeline)
    return 0


def _call(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    # A simulated instance's admin API, not the store's: the store's client (ingest.HttpTraceStore) does not apply.
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _fault(args: argparse.Namespace) -> int:
    body = {k: v for k, v in (("kind", args.kind), ("rate", args.rate), ("factor", args.factor),
                              ("duration_s", args.duration), ("lag_s", args.lag), ("period_s", args.period),
                              ("retry_after_s", args.retry_after)) if v is not None}
    target = args.instance.rstrip("/")
    try:
        status, answer = _call("POST", f"{target}/admin/faults", body)
    except (OSError, ValueError) as exc:
        fail(f"cannot reach the instance at {target}: {exc}")
        return 2
    if status != 201:
        message = answer.get("error", {}).get("message") if isinstance(answer, dict) else answer
        fail(f"{target} refused the fault (HTTP {status}): {message}")
        return 2
    if args.json:
        print(json.dumps(answer))
    else:
        until = f", ends after {args.duration:g} s" if args.duration else ", until cleared"
        print(f"fault {answer['id']} {answer['kind']} started on {answer['instance']}{until}")
    return 0


def _faults(args: argparse.Namespace) -> int:
    target = args.instance.rstrip("/")
    try:
        status, answer = _call("DELETE" if args.clear else "GET", f"{target}/admin/faults")
    except (OSError, ValueError) as exc:
        fail(f"cannot reach the instance at {target}: {exc}")
        return 2
    print(json.dumps(answer, indent=2))
    return 0 if status == 200 else 2


def _profiles(args: argparse.Namespace, gateway: str) -> dict[str, Any]:
    """Behaviour of the models the gateway serves: the built-in mix, overridden by the config's."""
    from sim.behaviour import BUILTIN_MODELS

    known: dict[str, Any] = {m.name: m.profile for m in BUILTIN_MODELS}
    if Path(args.config).is_file():
        known.update(config_of(args).sim.models)
    try:
        _, listing = _call("GET", f"{gateway}/v1/models")
        served = {card["id"] for card in listing["data"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {name: profile for name, profile in known.items() if name in served}


def _traffic(args: argparse.Namespace) -> int:
    import asyncio

    from pydantic import ValidationError

    from sim.rates import RateCurve
    from sim.scenarios import TrafficSpec
    from sim.traffic_report import format_traffic, summarise
    from sim.workload import plan_workload, run_workload

    gateway = api_url(args)
    try:
        mix = {k: float(v) for k, v in (part.split("=", 1) for part in args.mix.split(","))} if args.mix else None
        curve = RateCurve(kind=args.curve, rps=args.rps, period_s=args.period, amplitude=args.amplitude,
                          surge_start_s=args.surge_start, surge_duration_s=args.surge_duration,
                          surge_multiplier=args.surge_multiplier)
        spec = TrafficSpec(curve=curve, session_share=args.sessions, stream_share=args.stream,
                           max_requests=args.max_requests, feedback=not args.no_feedback,
                           **({"mix": mix} if mix else {}))
    except (ValueError, ValidationError) as exc:
        fail(f"invalid traffic options: {exc}")
        return 2
    plan = plan_workload(spec, args.duration, seed=args.seed)
    results = asyncio.run(run_workload(gateway, plan, spec, profiles=_profiles(args, gateway)))
    summary = summarise(results)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(format_traffic(summary))
    return 0


def _add_traffic(sim: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    t = sim.add_parser("traffic", parents=[common], help="open-loop corpus traffic through the gateway")
    t.add_argument("--api", "--gateway", dest="api", help="gateway URL (default: from the config)")
    t.add_argument("--duration", type=float, default=30.0, help="seconds of schedule (default: %(default)s)")
    t.add_argument("--rps", type=float, default=10.0, help="base rate (default: %(default)s)")
    t.add_argument("--curve", choices=("steady", "diurnal", "surge"), default="steady")
    t.add_argument("--period", type=float, default=60.0, help="diurnal: seconds per simulated day")
    t.add_argument("--amplitude", type=float, default=0.5, help="diurnal: swing around the base rate, 0-1")
    t.add_argument("--surge-start", type=float, help="surge window start, seconds")
    t.add_argument("--surge-duration", type=float, default=10.0, help="surge window length, seconds")
    t.add_argument("--surge-multiplier", type=float, default=10.0, help="rate multiplier in the window")
    t.add_argument("--mix", help="class weights, e.g. ticket=3,contract=1,code=1,math=1,chat=1")
    t.add_argument("--sessions", type=float, default=0.2, help="share of multi-turn ticket sessions")
    t.add_argument("--stream", type=float, default=0.0, help="share of streamed requests")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--max-requests", type=int, default=20_000, help="hard cap on requests sent")
    t.add_argument("--no-feedback", action="store_true", help="do not post POST /v1/feedback")
    t.add_argument("--json", help="also write the summary to this file")
    t.set_defaults(func=_traffic)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``sim`` and its subcommands."""
    sim = sub.add_parser("sim", parents=[common], help="the simulator").add_subparsers(
        dest="sim_command", required=True
    )
    fleet = sim.add_parser("fleet", parents=[common], help="serve simulated vLLM-like instances")
    fleet.add_argument("--instances", type=int, help="serve N instances of the built-in model mix (no config)")
    fleet.add_argument("--base-port", type=int, default=9100, help="port of instance 0; instance i on P+i")
    fleet.add_argument("--zero-delay", action="store_true", help="never sleep: the fastest mode")
    fleet.add_argument("--time-scale", type=float, help="model time runs this many times faster")
    fleet.add_argument("--seed", type=int, help="seeds answers and fault draws")
    fleet.add_argument("--fault-log", help="append each fault start and end to this JSON-lines file")
    fleet.add_argument("--scenario", help="run this scenario's fault timeline against the fleet")
    fleet.set_defaults(func=_fleet)

    fault = sim.add_parser("fault", parents=[common], help="inject a fault into one instance")
    fault.add_argument("instance", help="the instance's base URL, e.g. http://127.0.0.1:9100")
    fault.add_argument("kind", choices=KINDS, help="what goes wrong")
    fault.add_argument("--rate", type=float, help="probability per request (error, ratelimit, drift, garbage); "
                                                  "KV share leaked per minute (leak); peak KV share held "
                                                  "(kv-pressure)")
    fault.add_argument("--factor", type=float, help="latency multiplier (slow)")
    fault.add_argument("--duration", type=float, help="seconds until it ends by itself (default: until cleared)")
    fault.add_argument("--lag", type=float, help="freeze-metrics: serve metrics this many seconds old")
    fault.add_argument("--period", type=float, help="flap: seconds per high+low cycle; kv-pressure: "
                                                                         "seconds to rise and to fall")
    fault.add_argument("--retry-after", type=int, help="ratelimit: Retry-After seconds")
    fault.add_argument("--json", action="store_true", help="print the fault record as JSON")
    fault.set_defaults(func=_fault)

    faults = sim.add_parser("faults", parents=[common], help="list an instance's faults (or end them)")
    faults.add_argument("instance", help="the instance's base URL")
    faults.add_argument("--clear", action="store_true", help="end every active fault")
    faults.set_defaults(func=_faults)

    _add_traffic(sim, common)
