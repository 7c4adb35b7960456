"""The experiment reads of the store's HTTP API: two arms, versions or policies compared, grouped, and over time.

Handlers of :class:`ingest.http_api.routes.IngestApi` (which mounts them, behind the read token,
from its ``READ_ROUTES``); parameters validated as the other read routes' are
(:mod:`ingest.http_api.params`), bad ones a 400 ``invalid_parameter`` naming the parameter.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from ingest.experiments.compare import assumed_even_split
from ingest.http_api.answers import json_response
from ingest.http_api.openapi import GroupsAnswer, SeriesAnswer
from ingest.http_api.params import (
    COMPARE_PARAMS,
    BadParam,
    GroupsQuery,
    SeriesQuery,
    aggregate_query_of,
    bad_param_of,
    query_of,
    query_values,
    required_time,
)
from ingest.trace_store import TraceStore
from schemas.experiments import CompareQuery

__all__ = ["ExperimentRoutes"]


class ExperimentRoutes:
    """``GET /v1/analytics/compare``, ``/groups`` and ``/experiment-series`` over ``store``."""

    store: TraceStore

    async def compare(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/compare``: ``a`` against ``b`` metric by metric, with intervals and the SRM check.

        The split is checked against ``shares`` (the designed fractions of A and B). The store does
        not know the arms' shares (they are the gateway's configuration): without ``shares`` the
        report assumes 50/50 and says so in its verdict, and flags no mismatch.
        """
        raw: dict[str, Any] = query_values(request, COMPARE_PARAMS | {"shares"})  # shares: a list, repeats join it
        raw.update(start=required_time(request, "start").isoformat(), end=required_time(request, "end").isoformat())
        if "shares" in raw:
            raw["shares"] = raw["shares"].split(",")
        try:
            query = CompareQuery.model_validate(raw)
        except ValidationError as exc:
            raise bad_param_of(exc, CompareQuery, request) from exc
        report = await asyncio.to_thread(self.store.compare, query)
        return json_response(report if "shares" in request.query else assumed_even_split(report))

    async def groups(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/groups``: requests per arm, router version or policy hash (``by``) in a window."""
        q = query_of(GroupsQuery, request)
        groups = await asyncio.to_thread(self.store.experiment_groups, q.by, q.start, q.end)
        return json_response(GroupsAnswer(by=q.by, groups=groups))

    async def experiment_series(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/experiment-series``: each side's buckets, requests forced onto an arm left out.

        As ``compare`` counts them: the Experiments page's series. The filters narrow both sides
        (``start`` and ``end`` required), as ``/v1/analytics/buckets`` takes them.
        """
        q = query_of(SeriesQuery, request)
        if q.a == q.b:
            raise BadParam("b", "a and b must differ")
        series = await asyncio.to_thread(self.store.experiment_series, q.by, q.a, q.b, aggregate_query_of(q))
        return json_response(SeriesAnswer(by=q.by, a=q.a, b=q.b, buckets_a=series[q.a], buckets_b=series[q.b]))
