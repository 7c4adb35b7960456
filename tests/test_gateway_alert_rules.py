"""deploy/prometheus/routelens-gateway.rules.yml: the gateway's own alerts, on series its /metrics exports.

The promtool runs (check, unit tests) are in tests/test_probe_alert_rules.py, with the probe rules';
a real Prometheus firing one of these on a real gateway is in tests/e2e/test_prometheus_labels.py.
"""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path
from typing import Any

import yaml
from markdown.extensions.toc import slugify
from prometheus_client import CollectorRegistry, generate_latest

from router_core.metrics import GatewayMetrics
from schemas.fleet import InstanceSnapshot
from tests.promtext import Samples, samples
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client
from tests.router_core.gateway.test_forwarding import reply

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy/prometheus/routelens-gateway.rules.yml"
ON_CALL = ROOT / "docs/on-call.md"
OK = reply(200)
# KV of the stub instances (tests/router_core/gateway/test_forwarding.py): a 0.1, b 0.2.
KV_AT_005 = {"name": "kv-cache", "metric": "kv_cache_usage", "op": "<=", "threshold": 0.05, "exit_for": 0}
KV_AT_015 = {**KV_AT_005, "threshold": 0.15}


def every_rule() -> list[dict[str, Any]]:
    data: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return [r for group in data["groups"] for r in group["rules"]]


def rules() -> list[dict[str, Any]]:
    """The alerting rules (the recording rules are checked by promtool's unit tests)."""
    return [r for r in every_rule() if "alert" in r]


def used_series() -> set[str]:
    """Every routelens_* name an expression or an annotation's query reads (a recorded name is not read)."""
    text = " ".join(r["expr"] + " " + " ".join(r.get("annotations", {}).values()) for r in every_rule())
    return set(re.findall(r"(?<![:a-z_])routelens_[a-z_]+", text))


async def scrape(handlers: dict[str, Any], *requests: dict[str, Any], instances: dict[str, Any] | None = None,
                 **sections: Any) -> tuple[Samples, list[int]]:
    """A real in-process gateway: send ``requests``, then one scrape of its /metrics."""
    async with gateway_client(handlers, instances=instances, sections=sections) as (client, _):
        statuses = []
        for body in requests:
            resp = await client.post("/v1/chat/completions", json=body)
            await resp.read()
            statuses.append(resp.status)
        text = await (await client.get("/metrics")).text()
    return samples(text), statuses


def test_every_alert_names_its_severity_subject_value_threshold_and_runbook() -> None:
    anchors = {slugify(m, "-") for m in re.findall(r"^#+ (.+)$", ON_CALL.read_text(), re.M)}
    for r in rules():
        labels, summary = r["labels"], r["annotations"]["summary"]
        assert labels["severity"] in ("critical", "warning"), r["alert"]
        assert "$labels.instance" in summary or "$labels.model" in summary, r["alert"]
        assert "$value" in summary and "threshold" in summary, r["alert"]
        assert re.search(r"routelens_[a-z_]+", summary), r["alert"]  # the series it is about
        page, _, anchor = r["annotations"]["runbook_url"].partition("#")
        assert page == "docs/on-call.md" and anchor == r["alert"].lower() and anchor in anchors, r["alert"]
    by_name = {r["alert"]: r["labels"]["severity"] for r in rules()}
    assert by_name["RouteLensNoFeasibleInstance"] == "critical"  # seed 002 §3.2: the severe case
    assert by_name["RouteLensModelBreakerOpen"] == "critical" and by_name["RouteLensRouterSafeMode"] == "critical"
    assert by_name["RouteLensKVCacheHigh"] == by_name["RouteLensInstanceBreakerOpen"] == "warning"
    assert by_name["RouteLensRoutingOverBudget"] == "warning"  # seed 003 §1: the router's time budget


def test_the_routing_budget_is_15_percent_of_the_upstreams_time_and_recorded() -> None:
    """Seed 003 §1: the alert and the recorded ratio read the same expression; the alert fires above 0.15."""
    by_name = {r.get("alert") or r["record"]: r for r in every_rule()}
    alert = by_name["RouteLensRoutingOverBudget"]
    over, _, enough = alert["expr"].partition(" and ")  # and only with traffic enough to mean something
    ratio, _, threshold = over.rpartition(">")
    assert float(threshold) == 0.15 and alert["for"] in ("2m", "3m", "5m")
    assert "routelens_gateway_routing_duration_seconds_count[5m]" in enough and enough.split()[-2:] == [">=", "20"]
    assert by_name["instance:routelens_gateway_routing_over_upstream:ratio_rate5m"]["expr"].split() == ratio.split()
    assert "routelens_gateway_routing_duration_seconds_sum" in ratio and "[5m]" in ratio


def test_the_rules_read_only_series_the_gateway_exports() -> None:
    """Every series the rules read is on a real gateway's /metrics, with the labels they group by."""
    # Both instances over a 5% KV constraint: nothing is feasible, the request fails open.
    got, statuses = asyncio.run(scrape({"a": OK, "b": OK}, CHAT, constraints=[KV_AT_005]))
    assert statuses == [200]
    exported = {name for name, _ in got}
    assert used_series() <= exported, used_series() - exported
    assert got.value("routelens_instance_kv_cache_usage_ratio", instance="a", model="m") == 0.1
    assert got.value("routelens_instance_kv_cache_usage_ratio", instance="b", model="m") == 0.2
    assert got.value("routelens_instance_constraint_out", instance="a", model="m", constraint="kv-cache") == 1
    assert got.value("routelens_router_no_feasible_total", model="m", rule="model:m", outcome="fail_open") == 1
    assert got.value("routelens_router_mode", mode="safe") == 0
    assert math.isnan(got.value("routelens_router_misroute_ratio"))  # no feedback yet
    # the one request an instance answered: its own time and the upstream's
    assert got.value("routelens_gateway_routing_duration_seconds_count") == 1
    assert got.value("routelens_gateway_upstream_duration_seconds_count") == 1


def test_nothing_feasible_is_counted_by_what_the_router_did_and_a_feasible_pick_is_not() -> None:
    # a (KV 0.1) is feasible under 15%, b (0.2) is not.
    two_models = {"b": {"model": "m2"}}
    got, statuses = asyncio.run(scrape({"a": OK, "b": OK}, CHAT, {**CHAT, "model": "m2"}, instances=two_models,
                                       constraints=[KV_AT_015], router={"fallback_model": "m"}))
    assert statuses == [200, 200]
    assert got.value("routelens_router_no_feasible_total", model="m2", rule="model:m2", outcome="fallback_model") == 1
    assert not [key for key in got if key[0] == "routelens_router_no_feasible_total" and ("model", "m") in key[1]]
    assert got.value("routelens_instance_constraint_out", instance="a", model="m", constraint="kv-cache") == 0

    got, statuses = asyncio.run(scrape({"a": OK, "b": OK}, CHAT, CHAT, constraints=[KV_AT_005],
                                       router={"on_empty": "reject"}))
    assert statuses == [503, 503]
    assert got.value("routelens_router_no_feasible_total", model="m", rule="model:m", outcome="reject") == 2


def test_a_stale_or_unknown_kv_is_left_out_not_repeated() -> None:
    reg = CollectorRegistry()
    m = GatewayMetrics(reg)
    m.fleet.record([InstanceSnapshot(instance="a", model="m", kv_cache_usage=0.9, stale=True),
                    InstanceSnapshot(instance="b", model="m"),
                    InstanceSnapshot(instance="c", model="m", kv_cache_usage=0.8)])
    got = samples(generate_latest(reg).decode())
    assert [dict(ls)["instance"] for n, ls in got if n == "routelens_instance_kv_cache_usage_ratio"] == ["c"]
