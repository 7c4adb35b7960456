"""The demo's scripted day: its configuration, derived from the one given, the wait before it, the thread that plays it.

:func:`demo_config` paces the given configuration for a day that lasts minutes instead of hours,
``speed`` times faster again when asked (the tests run a day in tens of seconds): probes every
few seconds instead of every 30 (and latency judged against twice the baseline: the day's
load swings), the hysteresis, breaker and scrape timings divided by ``speed``,
the simulated models given the built-in mix's accuracy and price class where the configuration
leaves them out (so that where a request goes changes how well it is answered), and an
experiment with two arms and a shadow when the configuration has none. The shipped
``routelens.yaml`` is never rewritten: the derived configuration is written next to the trace file.

:func:`wait_for_intents` holds the day back until the gateway routes ``auto`` without waiting: its
semantic intents fitted (a first run has no cache beside the routes file: about a minute). Started
before, the day's first requests all waited for the fit, then came at once: breakers opened, the
error rate broke, and the first day looked like no other.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schemas.config import RouteLensConfig
from schemas.config.experiments import ExperimentsSettings
from sim.day import Injected, fleet_instance_of, play_days
from sim.scenarios import Scenario, load_scenario
from sim.traffic import TrafficResult

__all__ = ["DEFAULT_SCRIPT", "INTENTS_WAIT_S", "DayThread", "demo_config", "load_day", "wait_for_intents"]

DEFAULT_SCRIPT = Path(__file__).resolve().with_name("demo_day.yaml")  # in the package: installed too
PROBE_EVERY_S = 5.0  # a day of minutes: a drift must be caught within seconds, not after 2 of 3 rounds of 30 s
RECOVER_AFTER = 3  # passing probes in a row that let a drifted instance back (serve's default: 10)
# The day's load swings (a diurnal curve), and probe latency with it: a probe is "degraded" at twice its
# baseline, not at +20%, so that the latency alerts the demo shows are the KV pressure's, not the noon peak's.
LATENCY_TOLERANCE = 1.0
INTENTS_WAIT_S = 600.0  # the semantic intents' fit the day waits for at most (a first run's: about a minute)
_MIN_SCRAPE_S = 0.05
_MIN_STALE_S = 2.0  # a crash is the breaker's to find: metrics go stale no sooner than this
_DEMO_EXPERIMENT = {
    "key": "session",
    "arms": [{"name": "balanced", "router_version": "routelens-demo-balanced", "share": 0.5},
             {"name": "seed-score", "router_version": "routelens-demo-seed", "share": 0.5,
              "policy": {"scoring": {"preset": "seed-instance-score"}}}],
    "shadow": {"router_version": "routelens-demo-shadow", "sample": 0.25,
               "policy": {"scoring": {"preset": "balanced",
                                      "weights": {"quality": 0.3, "latency": 0.2, "cost": 0.4, "balance": 0.1}}}},
}


def load_day(path: str | Path, speed: float, rps: float | None = None) -> Scenario:
    """The day's script, ``speed`` times faster, its traffic at ``rps`` (default: the script's) times ``speed``.

    The rate grows with the speed because the simulated answers shrink with it: each instance
    is as busy as in the day at ``--speed 1``.
    """
    day = load_scenario(path)
    curve = day.traffic.curve
    if rps is not None:
        curve = curve.model_copy(update={"rps": rps})
    day = day.model_copy(update={"traffic": day.traffic.model_copy(update={"curve": curve})}).scaled(speed)
    curve = day.traffic.curve.model_copy(update={"rps": day.traffic.curve.rps * speed})
    return day.model_copy(update={"traffic": day.traffic.model_copy(update={"curve": curve})})


def _sim(config: RouteLensConfig, speed: float) -> dict[str, object]:
    from sim.behaviour import configured_profile

    models = {name: configured_profile(name, profile) for name, profile in config.sim.models.items()}
    return {"time_scale": config.sim.time_scale * speed, "warm_start": True, "models": models}


def demo_config(config: RouteLensConfig, speed: float = 1.0) -> RouteLensConfig:
    """The configuration the demo runs: ``config`` paced for a scripted day, ``speed`` times faster."""
    sc = config.scrape
    k = min(speed, sc.interval_s / _MIN_SCRAPE_S) if sc.interval_s > _MIN_SCRAPE_S else 1.0
    stale = max(sc.stale_after_s / speed, min(_MIN_STALE_S, sc.stale_after_s))
    scrape = sc.model_copy(update={"interval_s": sc.interval_s / k, "window_s": sc.window_s / speed,
                                   "stale_after_s": stale, "suspect_after_s": min(sc.suspect_after_s, stale)})
    constraints = [c.model_copy(update={"exit_for": c.exit_for / speed, "enter_for": c.enter_for / speed})
                   for c in config.constraints]
    breakers = config.resilience.breakers
    inst = breakers.instance
    inst = inst.model_copy(update={"open_s": inst.open_s / speed,
                                   "stall_after_s": None if inst.stall_after_s is None else inst.stall_after_s / speed})
    resilience = config.resilience.model_copy(update={"breakers": breakers.model_copy(update={"instance": inst})})
    pr = config.probes
    alerts = pr.alerts.model_copy(update={"evaluate_every_s": min(pr.alerts.evaluate_every_s, 1.0) / speed})
    hysteresis = pr.hysteresis.model_copy(update={"recover_m": min(pr.hysteresis.recover_m, RECOVER_AFTER)})
    latency = pr.latency.model_copy(update={"tolerance": max(pr.latency.tolerance, LATENCY_TOLERANCE),
                                            "trend_min_rise": max(pr.latency.trend_min_rise, LATENCY_TOLERANCE / 2)})
    if pr.latency.state_path is None:  # the demo's load, `speed` times faster: baselines of its own, not serve's
        pace = "" if speed == 1 else f"-x{speed:g}"
        latency = latency.model_copy(update={
            "state_path": f"{config.storage.duckdb_path}.probe-baselines-demo{pace}.json"})
    probes = pr.model_copy(update={"interval_s": max(min(pr.interval_s, PROBE_EVERY_S) / speed, 0.1),
                                   "alerts": alerts, "hysteresis": hysteresis, "latency": latency})
    update: dict[str, object] = {
        "scrape": scrape, "constraints": constraints, "resilience": resilience, "probes": probes,
        "sim": config.sim.model_copy(update=_sim(config, speed)),
    }
    experiments = config.experiments
    if experiments is None or len(experiments.arms) < 2 or experiments.shadow is None:
        update["experiments"] = ExperimentsSettings.model_validate(_DEMO_EXPERIMENT)
    return config.model_copy(update=update)


def _get_json(url: str) -> dict[str, Any] | None:
    """``url``'s JSON body (a 503's too: ``/health`` says why), or None when there is no answer to read."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:  # before OSError, its base: a degraded /health still has its body
        with exc:
            body = exc.read()
    except OSError:
        return None
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _fitting_line(gateway: str) -> str:
    """``fitting the semantic intents (5 routes, 120 examples; no cache yet: a first run, about a minute) ...``."""
    state = (_get_json(f"{gateway}/v1/router/state") or {}).get("intents") or {}
    cache = state.get("cache")  # "no cache yet", "K of N routes cached", or "no embedding path: no cache"
    said = [f"{state['routes']} routes, {state['examples']} examples"] if state.get("routes") else []
    said += ["no cache yet: a first run, about a minute" if cache == "no cache yet" else cache] if cache else []
    return "fitting the semantic intents" + (f" ({'; '.join(said)})" if said else "") + " before the day begins ..."


def wait_for_intents(gateway: str, *, stop: threading.Event, say: Callable[[str], None],
                     alive: Callable[[], bool] = lambda: True, timeout_s: float = INTENTS_WAIT_S,
                     poll_s: float = 0.5, clock: Callable[[], float] = time.monotonic) -> bool:
    """Wait until the gateway's ``/health`` says ``"intents": "ready"``; True when the day may begin.

    No ``intents`` in it (``routing.intents`` not configured): at once. ``failed``: said, and the day
    goes on (its requests for ``auto`` try the fit again, each waiting for it). While ``fitting``, one line
    says so, and one more how long it took. False (and said on stderr) when the gateway stopped
    answering or it is still fitting after ``timeout_s``; False, unsaid, when ``stop`` is set.

    Args:
        gateway: The gateway's base URL.
        stop: Set when the demo is stopped (Ctrl-C): the wait ends.
        say: Where the lines go.
        alive: False once the gateway's process has ended.
        timeout_s: How long a fit may take.
        poll_s: Seconds between reads of ``/health``.
        clock: Monotonic seconds.
    """
    t0, said = clock(), False
    while not stop.is_set():
        health = _get_json(f"{gateway}/health")
        status = None if health is None else health.get("intents", "ready")
        if status == "ready":
            if said:
                say(f"semantic intents ready after {clock() - t0:.0f} s: the day begins")
            return True
        if status == "failed":
            say(f"the semantic intents' fit failed ({(health or {}).get('reason', 'no reason given')}): the day "
                f"goes on, its requests for auto trying the fit again (each waits for it): see the gateway's log")
            return True
        if status == "fitting" and not said:
            said = True
            say(_fitting_line(gateway))
        if not alive():
            print("error: the gateway stopped before its semantic intents were fitted", file=sys.stderr)
            return False
        if clock() - t0 >= timeout_s:
            what = "still fitting" if status == "fitting" else "not answered by /health"
            print(f"error: the gateway's semantic intents were {what} after {timeout_s:g} s (routing.intents); "
                  f"its log above says how far the fit got", file=sys.stderr)
            return False
        stop.wait(poll_s)
    return False


class DayThread:
    """Plays the day in a loop on its own thread and event loop until :meth:`stop`.

    Args:
        day: The scaled script.
        config: The demo's configuration (the fleet the timeline's indices name, the simulated models).
        gateway: The gateway's base URL.
        on_result: Called (on the day's thread) with each request's result.
        on_inject: Called (on the day's thread) with each fault the script starts.
        on_day: Called with each day's number as it begins.
    """

    def __init__(self, day: Scenario, config: RouteLensConfig, gateway: str, *,
                 on_result: Callable[[TrafficResult], None], on_inject: Callable[[Injected], None],
                 on_day: Callable[[int], None]) -> None:
        ids = [spec.id for spec in config.fleet.instances]
        self._instance_of = fleet_instance_of(day, ids)  # ValueError now, before anything starts
        self._day, self._gateway = day, gateway
        self._urls = {spec.id: spec.url for spec in config.fleet.instances}
        self._profiles = dict(config.sim.models)
        self._on_result, self._on_inject, self._on_day = on_result, on_inject, on_day
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-day", daemon=True)

    def start(self) -> None:
        """Start playing."""
        self._thread.start()
        self._started.wait(10)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            self._started.set()
            await play_days(self._day, self._gateway, self._urls, instance_of=self._instance_of,
                            profiles=self._profiles, on_result=self._on_result, on_inject=self._on_inject,
                            on_day=lambda n, _: self._on_day(n))

        try:
            asyncio.run(main())
        except asyncio.CancelledError:
            pass

    def stop(self, timeout_s: float = 15.0) -> None:
        """Cancel the day (requests in flight are abandoned) and wait for the thread."""
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop closed in between
                pass
        self._thread.join(timeout_s)
