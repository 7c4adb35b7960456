"""The pure pieces of app.ui.probe_traffic: the ``?at=`` round trip and a served request's row."""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.ui import probe_traffic as pt
from schemas import OutcomeStatus
from schemas.queries import TraceSummary

AT = datetime(2026, 12, 6, 13, 26, 12, 975958, tzinfo=UTC)


def test_the_window_link_survives_the_url() -> None:
    """A raw ``+00:00`` decoded to a space, failed to parse, and the page opened the newest window."""
    link = pt.window_link("v4-32k-b", AT)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)
    assert link.startswith("probes?") and query["instance"] == ["v4-32k-b"]
    assert pt.parse_url_time(query["at"][0]) == AT


@pytest.mark.parametrize(("raw", "want"), [
    ("2026-12-06T13:26:12.975958+00:00", AT),
    ("2026-12-06T13:26:12.975958 00:00", AT),  # an old link's unencoded "+", as the browser decodes it
    ("2026-12-06T13:26:12.975958Z", AT),
    ("2026-12-06T15:26:12.975958 02:00", AT),
    ("2026-12-06T13:26:12.975958", AT),  # no zone: UTC
    ("2026-12-06 13:26:12.975958", AT),
    ("yesterday", None), ("", None), (None, None),
])
def test_parse_at(raw: str | None, want: datetime | None) -> None:
    got = pt.parse_url_time(raw)
    assert got == want
    if got is not None:
        assert got.utcoffset() is not None


def test_parse_at_keeps_a_negative_offset() -> None:
    assert pt.parse_url_time("2026-12-06T08:26:12.975958-05:00") == AT.astimezone(timezone(timedelta(hours=-5)))


def test_a_served_row_shows_the_request_s_latency() -> None:
    item = TraceSummary(request_id="req-1", ts=AT, router_version="t", query_hash="q", selected_model="big",
                        outcome_status=OutcomeStatus.OK, http_status=200, latency_ms=0.4, total_ms=812.6)
    row = pt.served_row(item, "small / s-0")
    assert row["latency ms"] == 813 and row["without it"] == "small / s-0" and row["outcome"] == "ok"
    assert row["request"].endswith("request_id=req-1")
