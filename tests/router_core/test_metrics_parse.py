
import pytest

from router_core.metrics_parse import MetricsParseError, parse_engine_metrics
from tests.contracts import contract

CONTRACTS = contract("prometheus")


def test_real_vllm_v0_scrape_uses_the_legacy_gpu_cache_gauge() -> None:
    g = parse_engine_metrics((CONTRACTS / "datadog_vllm_v0_opt125m_metrics.txt").read_text())
    assert (g.engine, g.queue, g.running, g.kv_cache_usage) == ("vllm", 0.0, 0.0, 0.0)


def test_real_sglang_scrape() -> None:
    g = parse_engine_metrics((CONTRACTS / "datadog_sglang_opt125m_metrics.txt").read_text())
    assert (g.engine, g.queue, g.running, g.kv_cache_usage) == ("sglang", 0.0, 0.0, 0.25)


def test_current_name_wins_over_legacy() -> None:
    text = (
        'vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.7\n'
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.1\n'
        'vllm:num_requests_waiting{model_name="m",engine="0"} 3\n'
        'vllm:num_requests_waiting{model_name="m",engine="1"} 2\n'
    )
    g = parse_engine_metrics(text)
    assert g.kv_cache_usage == 0.7 and g.queue == 5.0 and g.running is None


@pytest.mark.parametrize(
    "text",
    ["", "garbage {{{ not metrics", "# TYPE x gauge\nx 1\n", "vllm:num_requests_waiting{model_name=\"m\" 1\n"],
)
def test_unusable_text_raises(text: str) -> None:
    with pytest.raises(MetricsParseError):
        parse_engine_metrics(text)


def test_nan_and_out_of_range_values_are_contained() -> None:
    g = parse_engine_metrics("vllm:kv_cache_usage_perc NaN\nvllm:num_requests_running 1e308\n")
    assert g.kv_cache_usage is None and g.running == 1e308
    assert parse_engine_metrics("vllm:kv_cache_usage_perc 7\n").kv_cache_usage == 1.0
