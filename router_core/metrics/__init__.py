"""The gateway's and the router's Prometheus metrics, each defined once against an injected registry.

::

    collectors.py          GatewayMetrics, PluginMetrics, ModesMetrics, StageTimes
    buffered_histogram.py  BufferedHistogram: a histogram counted at scrape time, cheap on the request path
    fleet.py               FleetGauges: each instance's KV-cache usage and constraint latches, read per scrape
    throttles.py           ThrottleMetrics: what each rule's throttle did with the requests it held, and their wait
    routing_time.py        split_request_time: a served request's own time and its upstream's (seed 003 §1)
    worker_merge.py        merge_workers: every worker's series in one exposition, labelled ``worker``

The scraper's own metrics are beside it, in :mod:`router_core.state.scrape_metrics`.
"""

from router_core.metrics.buffered_histogram import BufferedHistogram
from router_core.metrics.collectors import GatewayMetrics, ModesMetrics, PluginMetrics, StageTimes
from router_core.metrics.fleet import FleetGauges
from router_core.metrics.throttles import ThrottleMetrics
from router_core.metrics.worker_merge import merge_workers

__all__ = ["BufferedHistogram", "FleetGauges", "GatewayMetrics", "ModesMetrics", "PluginMetrics", "StageTimes",
           "ThrottleMetrics", "merge_workers"]
