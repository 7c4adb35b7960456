"""The range replayer decides as router_core.decide.replay.replay does, trace by trace, under many policies."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from app.experiments import bulk
from app.experiments.replayer import Replayer
from bench.replay_traces import fleet_config
from router_core.decide.builtin import builtin_registry
from router_core.decide.policy import build_policy
from router_core.decide.replay import replay
from router_core.errors import UnknownModel
from schemas.config import RouteLensConfig
from schemas.queries import TraceFilter
from tests.app.experiments.seed import STATE_ONLY, T0, decided, store_traces

BAN = {"name": "ban-qwen", "metric": "queue", "op": "<=", "threshold": -1, "models": ["qwen-72b"]}
TIGHT = [{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.3},
         {"name": "queue", "metric": "queue", "threshold": 2}]

POLICIES: dict[str, RouteLensConfig] = {
    "same": fleet_config(scoring=STATE_ONLY),
    "balanced": fleet_config(),
    "dropped-model": fleet_config(scoring=STATE_ONLY, drop_model="qwen-72b"),
    "ban-constraint": fleet_config(scoring=STATE_ONLY, constraints=[BAN]),
    "tight-reject": fleet_config(constraints=TIGHT, router={"on_empty": "reject"}),
    "tight-fallback": fleet_config(constraints=TIGHT, router={"fallback_model": "qwen-72b"}),
    "p2c": fleet_config(router={"picker": "p2c"}),
    "softmax": fleet_config(router={"picker": "softmax"}),
    "night-profile": fleet_config(scoring={"preset": "balanced", "profiles": [
        {"name": "all-day", "hours": [0, 24], "weights": {"quality": 0.0, "latency": 0.9}}]}),
    "smaller-fleet": fleet_config(4),
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    traces = decided(400, fleet_config(), round_every=16)
    path = store_traces(tmp_path_factory.mktemp("engine") / "traces.duckdb", traces)
    return path, {t.request_id: t for t in traces}


@pytest.mark.parametrize("name", list(POLICIES))
def test_the_replayer_chooses_what_replay_chooses(name: str, stored: tuple[Path, dict[str, object]]) -> None:
    path, by_id = stored
    config = POLICIES[name]
    con = bulk.open_file(path)
    try:
        rows = [r for batch in bulk.read_rows(con, TraceFilter(start=T0, end=T0 + timedelta(days=1)), 128)
                for r in batch]
    finally:
        con.close()
    assert len(rows) == 400
    replayer = Replayer(build_policy(config, builtin_registry()))
    mismatched = []
    for row in rows:
        got = replayer.decide(row)
        try:
            want = replay(by_id[row.request_id], config)  # type: ignore[arg-type]
            expected = (want.selected_instance, want.selected_model)
        except UnknownModel:  # the new fleet has no instance of the requested model
            expected = (None, None)
        if (got.instance, got.model) != expected:
            mismatched.append((row.request_id, got.instance, expected[0]))
    assert mismatched == []
