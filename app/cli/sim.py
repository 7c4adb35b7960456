"""``routelens sim ...``: the simulated fleet, fault injection and traffic.

- ``sim fleet [--config F | --instances N [--base-port P]] [--zero-delay] [--time-scale K] [--seed S]
  [--fault-log F] [--scenario F]``: a config's instances listen on the ports of their URLs
  (``--base-port`` is refused without ``--instances``)
- ``sim fault http://127.0.0.1:PORT KIND [--rate R] [--factor K] [--duration S] [--lag S]``
- ``sim faults http://127.0.0.1:PORT [--clear]``: list (or end) an instance's faults
- ``sim traffic [--api URL] --duration S --rps R [--curve steady|diurnal|surge] ...``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from app.cli._common import api_url, config_of, err, fail, port_or_zero
from sim.faults import FaultKind

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = ["register"]

KINDS = [kind.value for kind in FaultKind]
# the flag of each field a command's options fill (pydantic names the field, the user typed the flag)
_TRAFFIC_FLAGS = {"rps": "--rps", "period_s": "--period", "amplitude": "--amplitude", "surge_start_s": "--surge-start",
                  "surge_duration_s": "--surge-duration", "surge_multiplier": "--surge-multiplier",
                  "session_share": "--sessions", "stream_share": "--stream", "max_requests": "--max-requests",
                  "mix": "--mix", "kind": "--curve"}
_FAULT_FLAGS = {"rate": "--rate", "factor": "--factor", "duration_s": "--duration", "lag_s": "--lag",
                "period_s": "--period", "retry_after_s": "--retry-after", "kind": "KIND"}
_BASE_PORT = 9100  # instance 0 of ``--instances`` without ``--base-port``
_BOUNDS = {"greater_than": "> {gt}", "greater_than_equal": ">= {ge}", "less_than": "< {lt}",
           "less_than_equal": "<= {le}"}


def _flag_error(exc: ValidationError, flags: dict[str, str]) -> str:
    """The first error of ``exc`` as one line naming the flag (``--rps must be > 0``)."""
    first = exc.errors(include_url=False)[0]
    loc = [str(part) for part in first["loc"]]
    flag = next((flags[part] for part in loc if part in flags), None)
    ctx = first.get("ctx") or {}
    if first["type"] in _BOUNDS:
        what = "must be " + _BOUNDS[first["type"]].format(**{k: f"{v:g}" if isinstance(v, float) else v
                                                              for k, v in ctx.items()})
    elif first["type"] == "literal_error" and flag == "--mix":
        return f"--mix: {loc[1]!r} is not a query class (expected {ctx.get('expected', '')})"
    else:
        what = str(first["msg"]).removeprefix("Value error, ")
    if flag is None:  # a check across fields ("a surge curve needs surge_start_s"): name their flags
        return re.sub(r"\b[a-z_]+\b", lambda m: flags.get(m.group(), m.group()), what)
    return f"{flag} {what}"


def _fleet_flags_problem(args: argparse.Namespace) -> str | None:
    """Why ``sim fleet``'s flags cannot be served as given (None: they can): one line naming the flag."""
    if args.base_port is not None and args.instances is None:
        return (f"--base-port applies only with --instances: the instances of {args.config} listen on the ports "
                f"of their URLs (fleet.instances); change those, or add --instances N for the built-in mix")
    if args.time_scale is not None and not args.time_scale > 0:  # also NaN; 0 divided every sleep (a 500)
        return f"--time-scale must be > 0 (model time runs this many times faster), not {args.time_scale:g}"
    return None


def _fleet(args: argparse.Namespace) -> int:
    from sim.behaviour import builtin_config
    from sim.fleet import InstancePortError, run_fleet, simulated

    if (problem := _fleet_flags_problem(args)) is not None:
        fail(problem)
        return 2
    if args.instances is not None:
        base_port = _BASE_PORT if args.base_port is None else args.base_port
        if base_port and base_port + args.instances - 1 > 65535:
            fail(f"--base-port {base_port} leaves no port for instance {args.instances - 1} "
                 f"(instance i listens on P+i, at most 65535)")
            return 2
        if getattr(args, "config_given", False):  # named, and not read: say so rather than serve another fleet
            err.print(f"[yellow]warning:[/yellow] --instances {args.instances} serves the built-in model mix: "
                      f"the fleet of {escape(args.config)} (--config) is not read", soft_wrap=True)
        try:
            config = builtin_config(args.instances, base_port, zero_delay=args.zero_delay,
                                    time_scale=args.time_scale or 1.0, seed=args.seed or 0)
        except ValueError as exc:
            fail(f"--instances: {exc}")
            return 2
    else:
        config = config_of(args)
        knobs = {k: v for k, v in (("zero_delay", args.zero_delay or None), ("time_scale", args.time_scale),
                                   ("seed", args.seed)) if v is not None}
        config = config.model_copy(update={"sim": config.sim.model_copy(update=knobs)})
        if not simulated(config.fleet.instances):  # external ones are real servers: never simulated
            fail(f"nothing to simulate: every instance in fleet.instances of {args.config} is engine: external")
            return 2
    timeline = None
    if args.scenario:
        from sim.fleet import fleet_timeline
        from sim.scenarios import load_scenario

        try:
            timeline = fleet_timeline(load_scenario(args.scenario), config)
        except (OSError, ValueError) as exc:
            fail(f"{exc}")
            return 2
    try:
        run_fleet(config, fault_log=args.fault_log, timeline=timeline)
    except InstancePortError as exc:
        where = "--base-port" if args.instances is not None else f"fleet.instances in {args.config}"
        fail(f"{exc.strerror}: is the fleet already running? ({where})")
        return 2
    except OSError as exc:
        fail(f"cannot open the fault log {args.fault_log} (--fault-log): {exc.strerror or exc}")
        return 2
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
    from pydantic import ValidationError

    from sim.faults import FaultSpec

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
        try:  # the instance names the field it refused; the user typed a flag
            FaultSpec.model_validate(body)
        except ValidationError as exc:
            message = _flag_error(exc, _FAULT_FLAGS)
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


class _Unreachable(Exception):
    """Nothing answers at the gateway's address (refused, no such host, no route): the message says why."""


def _profiles(args: argparse.Namespace, gateway: str) -> dict[str, Any]:
    """Behaviour of the models the gateway serves: the built-in mix, overridden by the config's.

    Raises:
        _Unreachable: No connection to the gateway could be made (a timeout is not this: it is running).
    """
    from sim.behaviour import BUILTIN_MODELS, configured_profile

    known: dict[str, Any] = {m.name: m.profile for m in BUILTIN_MODELS}
    if Path(args.config).is_file():
        known.update({name: configured_profile(name, profile) for name, profile in config_of(args).sim.models.items()})
    try:
        _, listing = _call("GET", f"{gateway}/v1/models")
        served = {card["id"] for card in listing["data"]}
    except urllib.error.URLError as exc:  # not an HTTPError: _call answers those
        if isinstance(exc.reason, OSError) and not isinstance(exc.reason, TimeoutError):
            raise _Unreachable(str(exc.reason.strerror or exc.reason).lower()) from exc
        return {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {name: profile for name, profile in known.items() if name in served}


def _traffic(args: argparse.Namespace) -> int:
    import asyncio

    from pydantic import ValidationError

    from sim.rates import RateCurve
    from sim.scenarios import MAX_REQUESTS_LIMIT, TrafficSpec
    from sim.traffic_report import failure, format_traffic, summarise
    from sim.workload import plan_workload, run_workload

    if not args.duration > 0:  # also NaN
        fail(f"--duration must be > 0 (seconds of schedule), not {args.duration:g}")
        return 2
    if args.json and (problem := _unwritable(Path(args.json))):  # found now, not after the whole run
        fail(f"cannot write the summary to {args.json} (--json): {problem}")
        return 2
    try:
        mix = _mix(args.mix) if args.mix else None
        curve = RateCurve(kind=args.curve, rps=args.rps, period_s=args.period, amplitude=args.amplitude,
                          surge_start_s=args.surge_start, surge_duration_s=args.surge_duration,
                          surge_multiplier=args.surge_multiplier)
        spec = TrafficSpec(curve=curve, session_share=args.sessions, stream_share=args.stream,
                           max_requests=args.max_requests, feedback=not args.no_feedback,
                           **({"mix": mix} if mix else {}))
    except ValidationError as exc:
        fail(_flag_error(exc, _TRAFFIC_FLAGS))
        return 2
    except ValueError as exc:
        fail(f"{exc}")
        return 2
    gateway = api_url(args)
    try:
        profiles = _profiles(args, gateway)
    except _Unreachable as exc:  # found before the run, not after --duration seconds of failed requests
        fail(f"the gateway at {gateway} could not be reached ({exc}); is it running? (--api)")
        return 1
    plan = plan_workload(spec, args.duration, seed=args.seed)
    results = asyncio.run(run_workload(gateway, plan, spec, profiles=profiles))
    summary = summarise(results)
    capped = len(plan) >= spec.max_requests  # the schedule stopped on the cap, not at --duration
    summary["stopped_by"] = "max_requests" if capped else "duration"
    print(format_traffic(summary))
    if capped:
        summary["stopped_at_s"] = round(plan[-1].at_s, 3)
        print(f"  stopped at {spec.max_requests} requests (--max-requests), {plan[-1].at_s:.1f} s into the "
              f"{args.duration:g} s schedule: the rest was not sent (--max-requests takes up to {MAX_REQUESTS_LIMIT})")
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(summary, indent=2), encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write the summary to {args.json} (--json): {exc.strerror or exc}")
            return 2
    if (whole := failure(summary, gateway)) is not None:  # some requests failing is a finding; all, a failed run
        fail(whole)
        return 1
    return 0


def _mix(text: str) -> dict[str, float]:
    """``--mix ticket=3,code=1`` as weights by class.

    Raises:
        ValueError: A part is not ``CLASS=WEIGHT`` with a number for the weight (the message names ``--mix``).
    """
    mix: dict[str, float] = {}
    for part in text.split(","):
        name, sep, weight = part.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            mix[name.strip()] = float(weight)
        except ValueError:
            raise ValueError(f"--mix: {part!r} is not CLASS=WEIGHT (e.g. ticket=3,code=1)") from None
    return mix


def _unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written (None: it can, as far as can be told before writing)."""
    folder = path.parent
    if path.is_dir():
        return "it is a folder"
    if not folder.is_dir():
        return f"no folder {folder}"
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "permission denied"
    return None


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
    t.add_argument("--max-requests", type=int, default=20_000,  # sim.scenarios.MAX_REQUESTS (not imported: startup)
                   help="requests sent at most: the run stops there, before --duration if need be, and its summary "
                        "says so (default: %(default)s)")
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
    fleet.add_argument("--base-port", type=port_or_zero,
                       help=f"with --instances only: port of instance 0, instance i on P+i (default {_BASE_PORT}; "
                            "0: each on a free port); a config's instances listen on the ports of their URLs")
    fleet.add_argument("--zero-delay", action="store_true", help="never sleep: the fastest mode")
    fleet.add_argument("--time-scale", type=float, help="model time runs this many times faster (> 0)")
    fleet.add_argument("--seed", type=int, help="seeds answers and fault draws")
    fleet.add_argument("--fault-log", help="append each fault start and end to this JSON-lines file")
    fleet.add_argument("--scenario", help="run this scenario's fault timeline against the fleet (its fleet, "
                                          "gateway and traffic sections are the drill's: not read here)")
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
