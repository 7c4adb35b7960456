"""The router's live state: what each instance reports, what the gateway saw, and how far to trust it.

::

    scraper.py         MetricsScraper: polls every instance's /metrics into the view (or follows another worker's)
    scrape_round.py    one scrape round as bytes: worker 0's rounds for the other workers of serve --workers N
    scrape_metrics.py  the scraper's own Prometheus metrics
    parse.py           an engine's /metrics text -> EngineGauges (vLLM, SGLang, TGI, llama.cpp)
    histogram.py       quantiles of engine histograms between two scrapes
    window.py          the gateway's own observations over a sliding window
    warmup.py          warm-up progress: the engine's gauge, else its process uptime, else assumed
    view.py            StateView: gauges, observations, latches -> one InstanceSnapshot per instance
    constraints.py     a hard constraint's metric, verdict and soft ramp on live state
    hysteresis.py      HysteresisLatch: the two-threshold, two-dwell latch the view keeps per constraint
    staleness.py       effective_state: old gauges decay toward saturated (pure; replay uses it too)
    inflight.py        InflightCounter: requests sent since the last scrape, folded into the snapshot
    inflight_share.py  in-flight counts across gateway workers: each publishes its own, adds the others'
    quality.py         QualityTable: each model's quality per query class, refined by feedback

Nothing here decides: the router reads the snapshots this builds. The scraper (aiohttp) loads on
first use of :class:`MetricsScraper` (PEP 562).
"""

from typing import TYPE_CHECKING

from router_core.lazy import lazy_getattr
from router_core.state.constraints import applies, holds, metric_value, ramp_factor
from router_core.state.histogram import Buckets, delta_quantile
from router_core.state.hysteresis import HysteresisLatch
from router_core.state.inflight import InflightCounter, Ticket
from router_core.state.parse import EngineGauges, MetricsParseError, decode_metrics, parse_engine_metrics
from router_core.state.quality import QualitySnapshot, QualityTable, diverges
from router_core.state.scrape_metrics import SCRAPE_FAILURE_REASONS, ScrapeMetrics
from router_core.state.staleness import ENGINES_WITHOUT_KV, effective_state
from router_core.state.view import StateView
from router_core.state.warmup import WarmupSource, warmup_progress
from router_core.state.window import ObservationWindow, WindowStats

if TYPE_CHECKING:
    from router_core.state.scraper import MetricsScraper

__all__ = [
    "ENGINES_WITHOUT_KV",
    "SCRAPE_FAILURE_REASONS",
    "Buckets",
    "EngineGauges",
    "HysteresisLatch",
    "InflightCounter",
    "MetricsParseError",
    "MetricsScraper",
    "ObservationWindow",
    "QualitySnapshot",
    "QualityTable",
    "ScrapeMetrics",
    "StateView",
    "Ticket",
    "WarmupSource",
    "WindowStats",
    "applies",
    "decode_metrics",
    "delta_quantile",
    "diverges",
    "effective_state",
    "holds",
    "metric_value",
    "parse_engine_metrics",
    "ramp_factor",
    "warmup_progress",
]


__getattr__ = lazy_getattr(__name__, {"MetricsScraper": "router_core.state.scraper"}, globals())  # and aiohttp
