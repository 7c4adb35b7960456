"""Engine ``/metrics`` text to the few gauges routing needs, with prometheus-client's parser.

Understands vLLM's current names (``vllm:kv_cache_usage_perc``), its legacy
``vllm:gpu_cache_usage_perc`` (used only when the current one is absent) and SGLang's
(``sglang:num_queue_reqs``, ``sglang:num_running_reqs``, ``sglang:token_usage``). Values of
several label sets (several engines in one server) are summed for queues and maxed for cache use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from router_core.histogram import Buckets

__all__ = ["EngineGauges", "MetricsParseError", "parse_engine_metrics"]

_QUEUE = ("vllm:num_requests_waiting", "sglang:num_queue_reqs")
_RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs")
_KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
_WARMUP = ("routelens_sim_warmup_progress",)
_TTFT = ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds")
_E2E = ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds")


class MetricsParseError(ValueError):
    """The text is not Prometheus exposition format, or carries no engine gauge."""


@dataclass(frozen=True, slots=True)
class EngineGauges:
    """Normalised state of one engine scrape; None where the engine does not say."""

    engine: str | None
    queue: float | None
    running: float | None
    kv_cache_usage: float | None
    warmup_progress: float | None
    ttft_buckets: Buckets | None = None
    e2e_buckets: Buckets | None = None


def _first(values: dict[str, list[float]], names: tuple[str, ...], *, reduce: str) -> float | None:
    for name in names:
        samples = [v for v in values.get(name, []) if math.isfinite(v)]
        if samples:
            return sum(samples) if reduce == "sum" else max(samples)
    return None


def parse_engine_metrics(text: str) -> EngineGauges:
    """Parse one scrape.

    Raises:
        MetricsParseError: When the text does not parse or has none of the known gauges.
    """
    wanted = set(_QUEUE + _RUNNING + _KV + _WARMUP)
    histograms = set(_TTFT + _E2E)
    values: dict[str, list[float]] = {}
    buckets: dict[str, dict[float, float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            if family.name in histograms:
                per_le = buckets.setdefault(family.name, {})
                for sample in family.samples:
                    if sample.name.endswith("_bucket") and "le" in sample.labels:
                        le = float(sample.labels["le"])
                        per_le[le] = per_le.get(le, 0.0) + float(sample.value)
                continue
            if family.name not in wanted:
                continue
            for sample in family.samples:
                if sample.name == family.name:
                    values.setdefault(family.name, []).append(float(sample.value))
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsParseError(f"unparseable metrics: {exc}") from exc
    if not values:
        raise MetricsParseError("no vLLM or SGLang gauges found")
    engine = "sglang" if any(n.startswith("sglang:") for n in values) else "vllm"
    kv = _first(values, _KV, reduce="max")
    warmup = _first(values, _WARMUP, reduce="max")
    return EngineGauges(
        engine=engine,
        queue=_first(values, _QUEUE, reduce="sum"),
        running=_first(values, _RUNNING, reduce="sum"),
        kv_cache_usage=None if kv is None else min(max(kv, 0.0), 1.0),
        warmup_progress=None if warmup is None else min(max(warmup, 0.0), 1.0),
        ttft_buckets=_buckets(buckets, _TTFT),
        e2e_buckets=_buckets(buckets, _E2E),
    )


def _buckets(found: dict[str, dict[float, float]], names: tuple[str, ...]) -> Buckets | None:
    """Return the first family's cumulative buckets, sorted, or None when absent or malformed."""
    for name in names:
        per_le = found.get(name)
        if not per_le or not any(math.isinf(le) for le in per_le):
            continue  # a histogram without +Inf is truncated: unusable
        ordered = tuple(sorted(per_le.items()))
        counts = [c for _, c in ordered]
        if all(math.isfinite(c) and c >= 0 for c in counts) and counts == sorted(counts):
            return ordered
    return None
