"""``routelens sim ...``: the simulated fleet, fault injection and traffic.

- ``sim fleet [--config F | --instances N [--base-port P]] [--zero-delay] [--time-scale K] [--seed S]
  [--fault-log F] [--scenario F]``: a config's instances listen on the ports of their URLs
  (``--base-port`` is refused without ``--instances``)
- ``sim fault http://127.0.0.1:PORT KIND [--rate R] [--factor K] [--duration S] [--lag S]``
- ``sim faults http://127.0.0.1:PORT [--clear]``: list (or end) an instance's faults
- ``sim traffic [--api URL] --duration S --rps R [--curve steady|diurnal|surge] ...`` (in :mod:`app.cli.sim_traffic`)
"""

from __future__ import annotations

import argparse
import json

from rich.markup import escape

from app.cli._common import config_of, err, fail, port_or_zero
from app.cli._sim_common import _call, _flag_error
from app.cli.sim_traffic import _add_traffic
from sim.faults import FaultKind

__all__ = ["register"]

KINDS = [kind.value for kind in FaultKind]
# the flag of each field a command's options fill (pydantic names the field, the user typed the flag)
_FAULT_FLAGS = {"rate": "--rate", "factor": "--factor", "duration_s": "--duration", "lag_s": "--lag",
                "period_s": "--period", "retry_after_s": "--retry-after", "kind": "KIND"}
_BASE_PORT = 9100  # instance 0 of ``--instances`` without ``--base-port``


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
