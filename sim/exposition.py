"""The ``/metrics`` of one simulated instance, under vLLM's own metric names and labels.

Each instance owns a fresh :class:`~prometheus_client.CollectorRegistry`; nothing touches the
global registry, so many instances (and many tests) live side by side in one process. Gauges are
read at scrape time from the engine, unless an :class:`Overrides` value forces them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CONTENT_TYPE", "EngineGauges", "InstanceMetrics", "Overrides", "with_invalid_utf8",
           "with_out_of_range_gauges"]

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # what vLLM serves; the 1.0.0 format is not needed here
_LABELS = ("model_name", "engine")
# vLLM's own bucket boundaries (vllm/v1/metrics/loggers.py), so histograms look like the real thing.
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                240.0, 480.0, 960.0, 1920.0, 7680.0)
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0)


# What the out-of-range-metrics fault reports: values no engine can mean (Overrides refuses them).
_HOSTILE = {"vllm:num_requests_waiting": b"-5.0", "vllm:num_requests_running": b"NaN",
            "vllm:kv_cache_usage_perc": b"1.7", "vllm:gpu_cache_usage_perc": b"1.7"}
_HOSTILE_LINE = re.compile(rb"^(" + b"|".join(re.escape(n.encode()) for n in _HOSTILE) + rb")(\{[^}]*\})? \S+$",
                           re.MULTILINE)


class EngineGauges(Protocol):
    """Live occupancy that the gauges report."""

    @property
    def waiting(self) -> int:
        """Requests admitted to the server but not yet holding a slot."""
        ...

    @property
    def running(self) -> int:
        """Requests holding a slot."""
        ...

    @property
    def kv_usage(self) -> float:
        """Share of the KV cache held by running requests, 0-1."""
        ...

    @property
    def warmup(self) -> float:
        """Warm-up progress, 0-1."""
        ...


class Overrides(BaseModel):
    """Gauge values forced by ``POST /admin/overrides``; None reports the live value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kv_cache_usage: float | None = Field(default=None, ge=0, le=1, description="vllm:kv_cache_usage_perc")
    queue: float | None = Field(default=None, ge=0, description="vllm:num_requests_waiting")
    running: float | None = Field(default=None, ge=0, description="vllm:num_requests_running")

    def merge(self, patch: Overrides) -> Overrides:
        """Return these overrides updated by the fields ``patch`` sets explicitly (None clears)."""
        return self.model_copy(update={name: getattr(patch, name) for name in patch.model_fields_set})


def _count_of(active_faults: Callable[[str], int], kind: str) -> Callable[[], float]:
    return lambda: float(active_faults(kind))


class InstanceMetrics:
    """Every collector of one instance, defined once, with ``record_*`` helpers.

    Args:
        model_name: Value of the ``model_name`` label.
        engine: The live gauges' source.
        registry: Registry to register in; a fresh one when omitted.
        fault_kinds: Kinds reported by ``routelens_sim_fault_active{kind}``.
        active_faults: Number of active faults of a kind, for that gauge.
    """

    def __init__(self, model_name: str, engine: EngineGauges, registry: CollectorRegistry | None = None,
                 fault_kinds: tuple[str, ...] = (), active_faults: Callable[[str], int] = lambda kind: 0):
        self.registry = registry if registry is not None else CollectorRegistry()
        self.overrides = Overrides()
        self._engine = engine
        labels = {"model_name": model_name, "engine": "0"}
        reg = self.registry
        gauge_sources = (
            ("vllm:num_requests_waiting", "Requests waiting to be processed.", self._waiting),
            ("vllm:num_requests_running", "Requests running on the engine.", self._running),
            ("vllm:kv_cache_usage_perc", "KV-cache usage, 1 means 100 percent.", self._kv_usage),
            ("vllm:gpu_cache_usage_perc", "GPU KV-cache usage (legacy name), 1 means 100 percent.", self._kv_usage),
            ("routelens_sim_warmup_progress", "Warm-up progress since the last start, 0-1.", self._warmup),
        )
        for name, doc, source in gauge_sources:
            Gauge(name, doc, _LABELS, registry=reg).labels(**labels).set_function(source)
        if fault_kinds:
            faults = Gauge("routelens_sim_fault_active", "Injected faults active now.", (*_LABELS, "kind"),
                           registry=reg)
            for kind in fault_kinds:
                faults.labels(kind=kind, **labels).set_function(_count_of(active_faults, kind))
        self._success = Counter("vllm:request_success", "Finished requests.", (*_LABELS, "finished_reason"),
                                registry=reg)
        self._prompt = Counter("vllm:prompt_tokens", "Prefill tokens processed.", _LABELS, registry=reg)
        self._generation = Counter("vllm:generation_tokens", "Tokens generated.", _LABELS, registry=reg)
        self._e2e = Histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency.", _LABELS,
                              buckets=_E2E_BUCKETS, registry=reg)
        self._ttft = Histogram("vllm:time_to_first_token_seconds", "Time to first token.", _LABELS,
                               buckets=_TTFT_BUCKETS, registry=reg)
        self._itl = Histogram("vllm:inter_token_latency_seconds", "Time between generated tokens.", _LABELS,
                              buckets=_ITL_BUCKETS, registry=reg)
        self._labels = labels

    def _waiting(self) -> float:
        forced = self.overrides.queue
        return float(self._engine.waiting) if forced is None else forced

    def _running(self) -> float:
        forced = self.overrides.running
        return float(self._engine.running) if forced is None else forced

    def _kv_usage(self) -> float:
        forced = self.overrides.kv_cache_usage
        return self._engine.kv_usage if forced is None else forced

    def _warmup(self) -> float:
        return self._engine.warmup

    def record_finished(self, finished_reason: str, prompt_tokens: int, completion_tokens: int,
                        e2e_s: float, ttft_s: float, itl_s: tuple[float, ...] = ()) -> None:
        """Count one finished request and observe its latencies (model seconds).

        Args:
            finished_reason: ``stop``, ``length`` or ``abort``.
            prompt_tokens: Prefill tokens.
            completion_tokens: Generated tokens.
            e2e_s: Arrival to last token.
            ttft_s: Arrival to first token.
            itl_s: Inter-token latencies, one per streamed piece (one for a whole JSON answer).
        """
        self._success.labels(finished_reason=finished_reason, **self._labels).inc()
        self._prompt.labels(**self._labels).inc(prompt_tokens)
        self._generation.labels(**self._labels).inc(completion_tokens)
        self._e2e.labels(**self._labels).observe(max(e2e_s, 0.0))
        self._ttft.labels(**self._labels).observe(max(ttft_s, 0.0))
        itl = self._itl.labels(**self._labels)
        for value in itl_s:
            itl.observe(max(value, 0.0))

    def render(self) -> bytes:
        """Return the registry in the Prometheus text format."""
        return generate_latest(self.registry)


def with_invalid_utf8(body: bytes) -> bytes:
    """``body`` with a byte that is not UTF-8 (0xFF) opening every ``model_name`` label value."""
    return body.replace(b'model_name="', b'model_name="\xff')


def with_out_of_range_gauges(body: bytes) -> bytes:
    """``body`` with the routing gauges out of their physical range (queue -5, running NaN, KV 1.7)."""
    return _HOSTILE_LINE.sub(lambda m: m.group(1) + (m.group(2) or b"") + b" " + _HOSTILE[m.group(1).decode()],
                             body)
