"""``routelens sim traffic``: open-loop corpus traffic through the gateway (a subcommand of :mod:`app.cli.sim`).

- ``sim traffic [--api URL] --duration S --rps R [--curve steady|diurnal|surge] ...``
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
from pathlib import Path
from typing import Any

from app.cli._common import api_url, config_of, fail
from app.cli._sim_common import _call, _flag_error

# the flag of each field a command's options fill (pydantic names the field, the user typed the flag)
_TRAFFIC_FLAGS = {"rps": "--rps", "period_s": "--period", "amplitude": "--amplitude", "surge_start_s": "--surge-start",
                  "surge_duration_s": "--surge-duration", "surge_multiplier": "--surge-multiplier",
                  "session_share": "--sessions", "stream_share": "--stream", "max_requests": "--max-requests",
                  "mix": "--mix", "kind": "--curve"}


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
