"""deploy/prometheus/: the probe and gateway alerts as Prometheus rules, checked and unit-tested by promtool.

The gateway rules' own checks (series, labels, runbooks) are in tests/test_gateway_alert_rules.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from probes.metrics import ProbeMetrics
from schemas.config.probes import AlertSettings

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy/prometheus/routelens-probes.rules.yml"
RULE_TESTS = ROOT / "deploy/prometheus/routelens-probes.rules.test.yml"
GATEWAY_RULES = ROOT / "deploy/prometheus/routelens-gateway.rules.yml"
GATEWAY_RULE_TESTS = ROOT / "deploy/prometheus/routelens-gateway.rules.test.yml"
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool missing: apt-get install -y prometheus")


def rules() -> list[dict[str, Any]]:
    data: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return [r for group in data["groups"] for r in group["rules"]]


def test_the_rules_are_the_default_alerts_with_their_severities() -> None:
    shipped = {r["alert"]: r["labels"]["severity"] for r in rules()}
    assert shipped == {r.name: r.severity for r in AlertSettings().rules}


def test_the_rules_use_only_series_the_prober_exports() -> None:
    reg = CollectorRegistry()
    ProbeMetrics(reg)
    exported = set(re.findall(r"^# TYPE (\S+)", generate_latest(reg).decode(), re.M))
    used = {name for r in rules() for name in re.findall(r"routelens_[a-z_]+", r["expr"])}
    assert used and used <= exported


def test_prometheus_loads_the_rules_in_compose() -> None:
    config = yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mounts = dict(v.split(":")[:2] for v in compose["services"]["prometheus"]["volumes"])
    config_in_container = PurePosixPath(mounts["./deploy/prometheus.yml"])
    rules_dir = PurePosixPath(mounts["./deploy/prometheus"])
    for entry in config["rule_files"]:
        assert (ROOT / "deploy" / entry).is_file()
        assert config_in_container.parent / entry == rules_dir / Path(entry).name


def promtool(*args: str) -> None:
    out = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60, cwd=RULES.parent)
    assert out.returncode == 0, out.stdout + out.stderr


def test_prometheus_loads_every_rule_file() -> None:
    config = yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
    assert {ROOT / "deploy" / entry for entry in config["rule_files"]} == {RULES, GATEWAY_RULES}


@needs_promtool
@pytest.mark.parametrize("rule_file", [RULES, GATEWAY_RULES], ids=["probes", "gateway"])
def test_promtool_checks_the_rules(rule_file: Path) -> None:
    promtool("check", "rules", str(rule_file))


@needs_promtool
@pytest.mark.parametrize("rule_tests", [RULE_TESTS, GATEWAY_RULE_TESTS], ids=["probes", "gateway"])
def test_promtool_unit_tests_fire_and_stay_quiet(rule_tests: Path) -> None:
    promtool("test", "rules", str(rule_tests))


@needs_promtool
def test_promtool_checks_the_shipped_config_and_its_rule_files() -> None:
    promtool("check", "config", str(ROOT / "deploy/prometheus.yml"))
