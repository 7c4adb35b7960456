"""One scrape round as a message: what one gateway worker scraped, for the others to take instead of scraping.

With ``serve --workers N`` every worker used to scrape every instance: N scrapes a second per
instance and N times the parsing CPU (about 0.2 s of a core a round at 200 instances). Now worker
0 scrapes and hands each round to the others (:mod:`app.run.scrape_share` carries it); a worker
that has not received a round for a while scrapes for itself again (:class:`MetricsScraper`).

A round is, per instance scraped, the parsed gauges (or the error that made the scrape fail), the
failure reason the scraping worker counted, and the time its view stamped the scrape with, so every
worker's snapshot says the same ``scraped_at``. A histogram's ``+Inf`` bound travels as ``null``
(JSON has no infinity).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import orjson

from router_core.state.histogram import Buckets
from router_core.state.parse import EngineGauges

__all__ = ["ScrapeResult", "decode_round", "encode_round"]


@dataclass(frozen=True, slots=True)
class ScrapeResult:
    """One instance's scrape in a round.

    ``gauges`` None: the scrape failed with ``error``. ``reason``: the failure reason counted
    (``out_of_range`` with gauges when some were refused), None when it went well.
    """

    instance: str
    gauges: EngineGauges | None
    error: str | None
    reason: str | None
    scraped_at: datetime | None


def _buckets_out(buckets: Buckets | None) -> list[list[float | None]] | None:
    return None if buckets is None else [[None if math.isinf(le) else le, n] for le, n in buckets]


def _buckets_in(raw: Any) -> Buckets | None:
    if raw is None:
        return None
    return tuple((math.inf if le is None else float(le), float(n)) for le, n in raw)


def encode_round(seq: int, took_s: float | None, results: list[ScrapeResult]) -> bytes:
    """The round as one JSON line's bytes (no newline)."""
    out = []
    for r in results:
        g = None
        if r.gauges is not None:
            g = asdict(r.gauges)
            g["ttft_buckets"] = _buckets_out(r.gauges.ttft_buckets)
            g["e2e_buckets"] = _buckets_out(r.gauges.e2e_buckets)
            g["adjustments"] = list(r.gauges.adjustments)
        out.append([r.instance, g, r.error, r.reason, None if r.scraped_at is None else r.scraped_at.isoformat()])
    return orjson.dumps({"seq": seq, "took_s": took_s, "results": out})


def decode_round(line: bytes) -> tuple[int, float | None, list[ScrapeResult]]:
    """``(seq, took_s, results)`` of a line :func:`encode_round` wrote.

    Raises:
        ValueError: The line is not such a round (orjson's, a missing key, a wrong shape).
    """
    try:
        data = orjson.loads(line)
        results = []
        for instance, g, error, reason, at in data["results"]:
            gauges = None
            if g is not None:
                g = dict(g)
                g["ttft_buckets"] = _buckets_in(g.get("ttft_buckets"))
                g["e2e_buckets"] = _buckets_in(g.get("e2e_buckets"))
                g["adjustments"] = tuple(g.get("adjustments") or ())
                gauges = EngineGauges(**g)
            results.append(ScrapeResult(str(instance), gauges, error, reason,
                                        None if at is None else datetime.fromisoformat(at)))
        took = data.get("took_s")
        return int(data["seq"]), None if took is None else float(took), results
    except (KeyError, TypeError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
        raise ValueError(f"not a scrape round: {exc}") from exc
