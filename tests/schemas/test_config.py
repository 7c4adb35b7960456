from pathlib import Path

import pytest

from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.yamlconf import parse_yaml_model

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
fleet:
  instances:
    - id: a
      model: m1
      url: http://127.0.0.1:9001
"""


@pytest.mark.parametrize("name", ["routelens.yaml", "deploy/routelens.compose.yaml"])
def test_shipped_configs_load(name: str) -> None:
    cfg = parse_yaml_model(RouteLensConfig, (ROOT / name).read_text(), name)
    assert len(cfg.fleet.instances) == 4
    assert {"kv-cache", "queue"} <= {c.name for c in cfg.constraints}
    kv = next(c for c in cfg.constraints if c.name == "kv-cache")
    assert (kv.threshold, kv.enter_bound) == (0.85, 0.80)  # the seed's 85% / 80%


def test_defaults_fill_missing_sections() -> None:
    cfg = parse_yaml_model(RouteLensConfig, GOOD)
    assert cfg.gateway.port == 8080 and cfg.constraints[0].metric == "kv_cache_usage"


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        (GOOD + "gateway:\n  port: eighty\n", 7, "gateway.port"),
        (GOOD.replace("http://127.0.0.1:9001", "ftp://x"), 5, "fleet.instances[0].url"),
        (GOOD + "    - id: a\n      model: m2\n      url: http://127.0.0.1:9002\n", 3, "fleet.instances"),
        (GOOD + "constraints:\n  - {name: kv, metric: vram, threshold: 1}\n", 7, "constraints[0].metric"),
        (GOOD + "surprise: 1\n", 6, "surprise"),
        (GOOD + "probes:\n  interval_s: 0\n", 7, "probes.interval_s"),
        (GOOD + "probes:\n  kinds: [syntax, smell]\n", 7, "probes.kinds[1]"),
        (GOOD + "probes:\n  hysteresis: {fail_k: 4, fail_n: 3}\n", 7, "probes.hysteresis"),
        (GOOD + "probes:\n  alerts:\n    rules:\n      - {name: Drift, verdict: failed, metric: value, op: <,"
         " threshold: 0.5}\n", 9, "probes.alerts.rules[0]"),
        (GOOD + "probes:\n  alerts:\n    webhooks:\n      - {url: 'slack.example'}\n", 9,
         "probes.alerts.webhooks[0].url"),
    ],
)
def test_errors_name_file_line_and_field(text: str, line: int, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, text, "conf.yaml")
    msg = str(info.value)
    assert f"conf.yaml:{line}: {field}:" in msg, msg


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, GOOD + "gateway: [unclosed\n", "bad.yaml")
    assert "bad.yaml:" in str(info.value) and "YAML syntax error" in str(info.value)
    assert info.value.problems[0][0] is not None


@pytest.mark.parametrize(
    ("constraint", "field", "message"),
    [
        ("{name: kv, metric: kv_cache_usage, threshold: 0.85, enter_below: 0.9}", "constraints[0]",
         "enter_below must be at most the threshold"),
        ("{name: warm, metric: warmup_progress, op: '>=', threshold: 0.5, soft_threshold: 0.4}", "constraints[0]",
         "soft_threshold must be at least the threshold"),
        ("{name: kv, metric: kv_cache_usage, threshold: 0.85, exit_for: -1}", "constraints[0].exit_for",
         "greater than or equal to 0"),
        ("{name: Bad_Name, metric: queue, threshold: 3}", "constraints[0].name", "String should match"),
    ],
)
def test_bad_constraints_fail_at_load_with_line_and_field(constraint: str, field: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, GOOD + f"constraints:\n  - {constraint}\n", "c.yaml")
    assert f"c.yaml:7: {field}:" in str(info.value) and message in str(info.value)


def test_unknown_score_terms_are_rejected() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, GOOD + "scoring:\n  weights: {vram: 1}\n", "c.yaml")
    assert "c.yaml:7: scoring.weights:" in str(info.value) and "unknown score terms ['vram']" in str(info.value)


@pytest.mark.parametrize(("workers", "cores", "expected"),
                         [("auto", 2, 2), ("auto", 32, 8), ("auto", None, 1), (3, 32, 3)])
def test_gateway_workers_default_to_one_per_core_capped(workers: object, cores: int | None, expected: int) -> None:
    from schemas.config import GatewaySettings

    assert GatewaySettings(workers=workers).worker_count(cores) == expected


@pytest.mark.parametrize("workers", [0, 65, "many"])
def test_gateway_workers_out_of_range_are_refused(workers: object) -> None:
    from pydantic import ValidationError

    from schemas.config import GatewaySettings

    with pytest.raises(ValidationError):
        GatewaySettings(workers=workers)


@pytest.mark.parametrize(("written", "read"), [("false", "false"), ("true", "true"), ('"false"', "false"),
                                               ("wait_for", "wait_for")])
def test_elasticsearch_refresh_as_the_docs_write_it_in_yaml(written: str, read: str) -> None:
    """``refresh: false`` unquoted is a YAML boolean: it means Elasticsearch's word, as the docs write it."""
    text = (f"fleet: {{instances: [{{id: a, model: m, url: 'http://127.0.0.1:9101'}}]}}\n"
            "storage:\n  backend: elasticsearch\n  elasticsearch:\n    url: http://127.0.0.1:9200\n"
            f"    refresh: {written}\n")
    es = parse_yaml_model(RouteLensConfig, text, "es.yaml").storage.elasticsearch
    assert es is not None and es.refresh == read


def test_elasticsearch_refresh_other_than_its_words_is_refused_at_its_line() -> None:
    text = ("fleet: {instances: [{id: a, model: m, url: 'http://127.0.0.1:9101'}]}\n"
            "storage:\n  backend: elasticsearch\n  elasticsearch:\n    url: http://127.0.0.1:9200\n    refresh: 1\n")
    with pytest.raises(ConfigError, match=r"es.yaml:6: storage.elasticsearch.refresh"):
        parse_yaml_model(RouteLensConfig, text, "es.yaml")
