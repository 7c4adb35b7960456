from dataclasses import dataclass

import pytest

from router_core.state.parse import REASONS, MetricsParseError, decode_metrics, parse_engine_metrics
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


def test_a_scrape_whose_every_gauge_is_out_of_range_is_refused_whole() -> None:
    with pytest.raises(MetricsParseError) as caught:
        parse_engine_metrics("vllm:kv_cache_usage_perc NaN\nvllm:num_requests_running 1e308\n")
    assert caught.value.reason == "out_of_range"
    assert "running=1e+308 refused (above 1e+06)" in str(caught.value)


@dataclass(frozen=True)
class Range:
    id: str
    text: str
    queue: float | None
    running: float | None
    kv: float | None
    adjustments: tuple[str, ...]


RANGES = [
    Range("negative-queue-refused", "vllm:num_requests_waiting -5\nvllm:num_requests_running 2\n", None, 2.0, None,
          ("queue=-5 refused (negative)",)),
    Range("one-negative-engine-refuses-the-sum", 'vllm:num_requests_running{engine="0"} 3\n'
          'vllm:num_requests_running{engine="1"} -1\nvllm:kv_cache_usage_perc 0.5\n', None, None, 0.5,
          ("running=-1 refused (negative)",)),
    Range("inf-queue-refused", "vllm:num_requests_waiting +Inf\nvllm:kv_cache_usage_perc 0.5\n", None, None, 0.5,
          ("queue=inf refused (not finite)",)),
    Range("sum-overflow-refused", 'vllm:num_requests_waiting{engine="0"} 1e308\n'
          'vllm:num_requests_waiting{engine="1"} 1e308\nvllm:kv_cache_usage_perc 0.5\n', None, None, 0.5,
          ("queue=inf refused (above 1e+06)",)),
    Range("kv-rounding-clamped", "vllm:kv_cache_usage_perc 1.004\nvllm:num_requests_waiting 1\n", 1.0, None, 1.0,
          ("kv_cache_usage=1.004 clamped to 1",)),
    Range("kv-slightly-negative-clamped", "vllm:kv_cache_usage_perc -0.001\n", None, None, 0.0,
          ("kv_cache_usage=-0.001 clamped to 0",)),
    Range("kv-above-1-refused", "vllm:kv_cache_usage_perc 7\nvllm:num_requests_waiting 1\n", 1.0, None, None,
          ("kv_cache_usage=7 refused (outside 0-1)",)),
    Range("kv-nan-refused", "vllm:kv_cache_usage_perc NaN\nvllm:num_requests_waiting 1\n", 1.0, None, None,
          ("kv_cache_usage=nan refused (not finite)",)),
    Range("in-range-untouched", "vllm:kv_cache_usage_perc 1\nvllm:num_requests_waiting 0\n", 0.0, None, 1.0, ()),
]


@pytest.mark.parametrize("case", RANGES, ids=lambda c: c.id)
def test_out_of_range_gauges_are_refused_or_clamped_and_say_which(case: Range) -> None:
    g = parse_engine_metrics(case.text)
    assert (g.queue, g.running, g.kv_cache_usage, g.adjustments) == (case.queue, case.running, case.kv,
                                                                      case.adjustments)
    assert g.has_refused == any("refused" in a for a in case.adjustments)


def test_warmup_is_clamped_and_its_nan_refused() -> None:
    assert parse_engine_metrics("vllm:num_requests_waiting 1\nroutelens_sim_warmup_progress 1.5\n").warmup_progress == 1
    g = parse_engine_metrics("vllm:num_requests_waiting 1\nroutelens_sim_warmup_progress NaN\n")
    assert g.warmup_progress is None and g.adjustments == ("warmup_progress=nan refused (not finite)",)


@pytest.mark.parametrize(("body", "reason"), [
    (b'vllm:num_requests_waiting{model_name="\xff\xfe"} 1\n', "decode"),
    (b"garbage {{{ not metrics", "parse"),
    (b"# TYPE x gauge\nx 1\n", "no_gauges"),
    (b"vllm:num_requests_waiting -1\n", "out_of_range"),
], ids=["invalid-utf8", "unparseable", "no-gauges", "out-of-range"])
def test_every_failure_carries_a_reason_from_the_vocabulary(body: bytes, reason: str) -> None:
    with pytest.raises(MetricsParseError) as caught:
        parse_engine_metrics(body)
    assert caught.value.reason == reason and reason in REASONS


def test_invalid_utf8_is_refused_by_decode_metrics_too() -> None:
    with pytest.raises(MetricsParseError, match="not UTF-8 \\(byte 2 of 4\\)"):
        decode_metrics(b"ab\xffc")
    assert decode_metrics("é 1".encode()) == "é 1"


# Names and types from TGI's documented metrics (huggingface.co/docs/text-generation-inference/reference/metrics):
# tgi_queue_size and tgi_batch_current_size are gauges (counts), tgi_batch_current_max_tokens a gauge of tokens
# (no KV-cache share exists in TGI), tgi_request_duration the end-to-end latency histogram in seconds.
TGI = """\
# HELP tgi_queue_size Current queue size
# TYPE tgi_queue_size gauge
tgi_queue_size 4
# HELP tgi_batch_current_size Current batch size
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 7
# HELP tgi_batch_current_max_tokens Maximum tokens for the current batch
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 9000
# HELP tgi_request_count Total number of requests
# TYPE tgi_request_count counter
tgi_request_count 12
# HELP tgi_request_duration Total time spent processing the request (e2e latency)
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="0.5"} 2
tgi_request_duration_bucket{le="1"} 10
tgi_request_duration_bucket{le="+Inf"} 12
tgi_request_duration_sum 9.5
tgi_request_duration_count 12
"""


def test_tgi_queue_and_batch_map_onto_queue_and_running() -> None:
    g = parse_engine_metrics(TGI)
    assert (g.engine, g.queue, g.running, g.kv_cache_usage) == ("tgi", 4.0, 7.0, None)
    assert g.e2e_buckets == ((0.5, 2.0), (1.0, 10.0), (float("inf"), 12.0)) and g.ttft_buckets is None


def test_vllm_cache_config_info_gives_blocks_and_block_size() -> None:
    g = parse_engine_metrics((CONTRACTS / "datadog_vllm_v0_opt125m_metrics.txt").read_text())
    assert (g.num_gpu_blocks, g.block_size) == (7281, 16)
    sglang = parse_engine_metrics((CONTRACTS / "datadog_sglang_opt125m_metrics.txt").read_text())
    assert (sglang.num_gpu_blocks, sglang.block_size) == (None, None)


# llama.cpp's llama-server --metrics, rendered as its source renders it (tests/contracts/SOURCES.md).
def test_llamacpp_deferred_is_the_queue_processing_is_running_and_kv_is_not_reported() -> None:
    g = parse_engine_metrics((CONTRACTS / "llamacpp_server_metrics.txt").read_bytes())
    assert (g.engine, g.queue, g.running, g.kv_cache_usage, g.adjustments) == ("llamacpp", 3.0, 4.0, None, ())
    assert (g.ttft_buckets, g.e2e_buckets, g.process_start_s) == (None, None, None)


def test_an_older_llamacpp_build_reports_its_kv_cache_usage_ratio() -> None:
    g = parse_engine_metrics((CONTRACTS / "llamacpp_server_legacy_kv_metrics.txt").read_bytes())
    assert (g.engine, g.queue, g.running, g.kv_cache_usage) == ("llamacpp", 0.0, 2.0, 0.3125)


def test_a_llamacpp_instance_without_kv_is_judged_by_its_queue_not_held_out_as_full() -> None:
    from datetime import timedelta

    from router_core.state.staleness import effective_state
    from schemas.config import ScrapeSettings
    from tests.router_core.conftest import NOW, decide, healthy, snap

    scrape = ScrapeSettings()
    g = parse_engine_metrics((CONTRACTS / "llamacpp_server_metrics.txt").read_bytes())
    state = snap("big-a", kv=g.kv_cache_usage, queue=g.queue, age=0.5).model_copy(update={"engine": g.engine})
    assert effective_state(state, NOW, scrape, 10.0).kv_cache_usage == 0.0
    old = state.model_copy(update={"scraped_at": NOW - timedelta(seconds=scrape.stale_after_s)})
    assert effective_state(old, NOW, scrape, 10.0).kv_cache_usage == 1.0  # ageing still decays it
    assert "big-a" in decide(healthy() | {"big-a": state})[0]  # the default kv-cache constraint keeps it in
