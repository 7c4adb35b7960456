"""Real processes: one gateway serving two arms against the simulated fleet, a shadow beside them.

Traffic comes through the official OpenAI SDK; the traces read back from the gateway's store
carry the arm that served them, with its router version and policy hash, and the shadow's choice.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from openai import OpenAI

from app.run.procs import free_port
from router_core.experiments import build_experiment
from schemas import DecisionTrace
from schemas.config import RouteLensConfig
from tests.e2e.conftest import Proc, _instance
from tests.e2e.net import call, stored_policy
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

EXPERIMENTS = {
    "key": "header:x-user-id",
    "arms": [
        {"name": "control", "router_version": "rl-1.0", "share": 0.5},
        {"name": "balanced", "router_version": "rl-1.1", "share": 0.5, "policy": {"scoring": {"preset": "balanced"}}},
    ],
    "shadow": {"router_version": "rl-2.0-rc", "sample": 1.0,
               "policy": {"scoring": {"preset": "balanced", "weights": {"cost": 0.7, "quality": 0.3}}}},
}


@dataclass
class Served:
    gateway: str
    config: RouteLensConfig
    path: Path
    raw: dict[str, Any]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("arms")
    instances = [_instance("big-a", "big"), _instance("big-b", "big"),
                 _instance("small-a", "small", 8192), _instance("small-b", "small", 8192)]
    raw = {
        "gateway": {"port": free_port(), "max_attempts": 2},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 20},
        "scrape": {"interval_s": 0.2, "timeout_s": 0.5, "stale_after_s": 30},
        "sim": {"time_scale": 20, "seed": 1},
        "probes": {"enabled": False},
        "models": {"big": {"quality": {"chat": 0.9}}, "small": {"quality": {"chat": 0.7}}},
        "fleet": {"instances": instances},
        "experiments": EXPERIMENTS,
    }
    cfg = tmp / "routelens.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    py = [sys.executable, "-m", "app"]
    procs = [Proc([*py, "sim", "fleet", "--config", str(cfg)])]
    try:
        procs[0].wait_for("fleet ready")
        procs.append(Proc([*py, "serve", "--config", str(cfg), "--workers", "1"]))
        procs[1].wait_for("gateway ready")
        yield Served(f"http://127.0.0.1:{raw['gateway']['port']}",  # type: ignore[index]
                     RouteLensConfig.model_validate(raw), cfg, raw)
    finally:
        for p in reversed(procs):
            p.stop()


def client(served: Served) -> OpenAI:
    return OpenAI(base_url=f"{served.gateway}/v1", api_key="not-needed", max_retries=0, timeout=20)


def ask(served: Served, headers: dict[str, str]) -> str:
    raw = client(served).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "hello, how are you today?"}], extra_headers=headers)
    assert raw.parse().choices[0].message.content
    return raw.headers["x-request-id"]


def trace_of(served: Served, request_id: str) -> DecisionTrace:
    def found() -> DecisionTrace | None:
        status, body = call("GET", f"{served.gateway}/v1/traces/{request_id}")
        return DecisionTrace.model_validate(body) if status == 200 else None

    trace = wait_until(found, timeout_s=30)
    assert trace is not None, f"no trace for {request_id}"
    return trace


def state_of(served: Served) -> dict[str, Any]:
    status, state = call("GET", f"{served.gateway}/v1/router/state")
    assert status == 200, state
    return state  # type: ignore[no-any-return]


def test_two_arms_serve_and_every_trace_names_its_arm_version_and_policy(served: Served) -> None:
    experiment = build_experiment(served.config)
    assert experiment is not None
    arms = experiment.arms.by_name
    users = [f"user-{i}" for i in range(30)]
    traces = {u: trace_of(served, ask(served, {"x-user-id": u})) for u in users}
    seen = {t.experiment_arm for t in traces.values()}
    assert seen == {"control", "balanced"}
    hashes = {a["name"]: a["policy_hash"] for a in state_of(served)["experiment"]["arms"]}  # effective policies
    for t in traces.values():
        assert t.experiment_arm is not None
        arm = arms[t.experiment_arm]
        assert (t.router_version, t.policy_hash) == (arm.router_version, hashes[t.experiment_arm])
        assert t.selection_probability == 1.0
    assert hashes["control"] != hashes["balanced"]
    for name, h in hashes.items():  # each stored under its hash: its scoring is the arm's
        stored = wait_until(lambda h=h: stored_policy(served.gateway, h), timeout_s=30)
        assert stored is not None, f"policy of arm {name} not stored"
        config = arms[name].router.policy.config
        assert config is not None
        assert json.loads(stored["document"])["config"]["scoring"] == config.scoring.model_dump(mode="json")
    again = trace_of(served, ask(served, {"x-user-id": users[0]}))
    assert again.experiment_arm == traces[users[0]].experiment_arm  # a user stays in their arm


def test_the_forcing_header_wins_and_an_unknown_arm_is_refused(served: Served) -> None:
    for arm in ("control", "balanced"):
        t = trace_of(served, ask(served, {"x-user-id": "user-0", "x-routelens-arm": arm}))
        assert t.experiment_arm == arm and t.arm_forced  # marked: comparisons leave it out
    assert not trace_of(served, ask(served, {"x-user-id": "user-0"})).arm_forced
    with pytest.raises(openai.BadRequestError) as info:
        ask(served, {"x-routelens-arm": "no-such-arm"})
    assert info.value.status_code == 400 and "no-such-arm" in str(info.value.message)


def test_the_shadow_policy_is_recorded_in_the_traces(served: Served) -> None:
    experiment = build_experiment(served.config)
    assert experiment is not None and experiment.shadow is not None
    shadow_hash = state_of(served)["experiment"]["shadow"]["policy_hash"]  # the shadow's effective policy
    for i in range(5):
        t = trace_of(served, ask(served, {"x-user-id": f"shadowed-{i}"}))
        assert t.shadow is not None
        assert (t.shadow.router_version, t.shadow.policy_hash) == ("rl-2.0-rc", shadow_hash)
        assert t.shadow.selected_instance is not None
        assert t.shadow.flipped == (t.shadow.selected_instance != t.selected_instance)
        assert t.shadow.live_rank is None or t.shadow.live_rank >= 1


def test_routelens_compare_reports_both_arms_with_intervals(served: Served) -> None:
    since = datetime.now(UTC) - timedelta(minutes=5)
    for i in range(60):
        ask(served, {"x-user-id": f"compared-{i}"})
    ids = [ask(served, {"x-user-id": f"last-{arm}", "x-routelens-arm": arm}) for arm in ("control", "balanced")]
    for rid in ids:  # stored: the window below holds every request sent above
        trace_of(served, rid)
    until = datetime.now(UTC) + timedelta(minutes=1)
    out = subprocess.run([sys.executable, "-m", "app", "compare", "control", "balanced", "--since", since.isoformat(),
                          "--until", until.isoformat(), "--api", served.gateway, "--min-samples", "10", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert (report["a"], report["b"]) == ("control", "balanced")
    assert report["n_a"] >= 10 and report["n_b"] >= 10 and report["n_a"] + report["n_b"] >= 62
    assert 0 <= report["srm_p"] <= 1
    for name in ("error_rate", "latency_p50_ms", "cost_per_request"):
        lo, hi = report["metrics"][name]["ci"]
        assert lo <= report["metrics"][name]["delta"] <= hi, (name, report["metrics"][name])
    lo, hi = report["metrics"]["latency_p50_ms"]["ci"]
    assert hi > lo  # a real interval, not a point


def test_changed_shares_are_reloaded_from_the_file_without_a_restart(served: Served) -> None:
    # Runs last in this module: it leaves every key in "balanced".
    raw = {**served.raw, "experiments": {**EXPERIMENTS, "arms": [
        {**EXPERIMENTS["arms"][0], "share": 0.0}, {**EXPERIMENTS["arms"][1], "share": 1.0}]}}  # type: ignore[index]
    served.path.write_text(yaml.safe_dump(raw))

    def all_balanced() -> bool:
        return all(trace_of(served, ask(served, {"x-user-id": f"reload-{i}"})).experiment_arm == "balanced"
                   for i in range(8))

    assert wait_until(all_balanced, 20, 0.5)
    _, state = call("GET", f"{served.gateway}/v1/router/state")
    shares = {a["name"]: a["share"] for a in state["experiment"]["arms"]}
    assert shares == {"control": 0.0, "balanced": 1.0}
    served.path.write_text("experiments: [this does not load")  # a broken file: the running experiment stays
    assert trace_of(served, ask(served, {"x-user-id": "reload-after-bad"})).experiment_arm == "balanced"
