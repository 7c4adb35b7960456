"""The app's limits come from the configuration it runs with: constraints first, app.health otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ui.limits import CONFIG_ENV, SETTINGS_ENV, load_limits
from schemas.config import AppSettings, HealthBand, HealthThresholds

CONFIG = """
fleet:
  instances:
    - {id: a-0, model: big, url: "http://127.0.0.1:9"}
    - {id: b-0, model: small, url: "http://127.0.0.1:9"}
constraints:
  - {name: kv-cache, metric: kv_cache_usage, op: "<=", threshold: 0.85, enter_below: 0.80}
  - {name: kv-small, metric: kv_cache_usage, op: "<=", threshold: 0.70, models: [small]}
  - {name: warm, metric: warmup_progress, op: ">=", threshold: 0.5, soft_threshold: 0.8}
app:
  cost_unit: credits
  health: {queue: {yellow: 3, red: 7}}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "routelens.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def test_a_constraint_sets_the_colour_where_the_router_removes(config: Path) -> None:
    lim = load_limits({CONFIG_ENV: str(config)})
    assert lim.source == str(config.resolve()) and lim.problem is None
    kv = lim.limit("kv_cache_usage", "big", "a-0")
    assert kv is not None and kv.source == "constraint kv-cache"
    # The old grid bands (90% / 95%) would have shown 0.88 green while the router removes it above 85%.
    assert [kv.status(v) for v in (0.5, 0.82, 0.88)] == ["green", "yellow", "red"]
    assert lim.text("kv_cache_usage", 0.88, "big") == "88% / 85%"
    assert lim.status("kv_cache_usage", 0.75, "small") == "red"  # the model's own tighter constraint
    warm = lim.limit("warmup_progress")
    assert warm is not None and [warm.status(v) for v in (0.3, 0.6, 0.9)] == ["red", "yellow", "green"]


def test_unconstrained_metrics_use_app_health_and_cost_has_its_unit(config: Path) -> None:
    lim = load_limits({CONFIG_ENV: str(config)})
    queue = lim.limit("queue")
    assert queue is not None and queue.source == "app.health.queue"
    assert [queue.status(v) for v in (1, 3, 9)] == ["green", "yellow", "red"]
    assert lim.text("queue", 9) == "9 / 7 requests"
    assert lim.cost(2.5) == "2.50 credits"
    assert lim.limit("running") is None and lim.text("running", 3) == "3 requests"


def test_without_a_file_the_defaults_and_handed_settings(tmp_path: Path) -> None:
    settings = AppSettings(health=HealthThresholds(error_rate=HealthBand(yellow=0.2, red=0.3)), cost_unit="USD")
    lim = load_limits({CONFIG_ENV: str(tmp_path / "missing.yaml"), SETTINGS_ENV: settings.model_dump_json()})
    assert lim.problem is not None and "does not exist" in lim.problem
    kv = lim.limit("kv_cache_usage")
    assert kv is not None and kv.threshold == 0.85  # the configuration's default constraint
    assert lim.cost(1) == "1.00 USD"
    assert [lim.status("error_rate", v) for v in (0.1, 0.25, 0.3)] == ["green", "yellow", "red"]
    assert lim.status("queue", 2) == "green"  # the default queue constraint (<= 10), not the grid's band


def test_an_invalid_file_is_named_not_fatal(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("fleet: {instances: []}\n", encoding="utf-8")
    lim = load_limits({CONFIG_ENV: str(bad)})
    assert lim.problem is not None and str(bad) in lim.problem
    assert lim.limit("kv_cache_usage") is not None
