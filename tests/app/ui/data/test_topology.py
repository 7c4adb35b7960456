from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.ui.data import topology as tp
from schemas.queries import ConstraintStat, TrafficEdge

EDGES = [
    TrafficEdge(rule="code", model="coder", instance="c-a", requests=6),
    TrafficEdge(rule="code", model="coder", instance="c-b", requests=2),
    TrafficEdge(rule="chat", model="llama", instance="l-a", requests=2),
    TrafficEdge(rule=None, model=None, instance=None, requests=0),
]
FALLBACK = [TrafficEdge(rule="code", model="coder", instance="c-b", requests=5)]  # clamped to 2
REJECTED = [
    ConstraintStat(constraint="kv-cache", instance="c-a", model="coder", removed=3, decisive=1),
    ConstraintStat(constraint="kv-cache", instance="c-a", model="coder-old", removed=1),
    ConstraintStat(constraint="error-rate", instance="c-z", model="coder", removed=4, undecided=4),
]


def links_by(links, nodes):  # (source name, target name, flow) -> value
    names = nodes["name"].tolist()
    return {(names[r.source], names[r.target], r.flow): r.value for r in links.itertuples()}


def test_nodes_columns_and_shares() -> None:
    nodes, _ = tp.sankey_frames(EDGES, FALLBACK, REJECTED)

    assert nodes["node"].tolist() == [
        "rule:chat", "rule:code", "model:coder", "model:llama",
        "instance:c-a", "instance:c-b", "instance:c-z", "instance:l-a",
        "constraint:error-rate", "constraint:kv-cache",
    ]
    by = nodes.set_index("node")
    assert by.loc["rule:code", "requests"] == 8 and by.loc["rule:code", "share"] == 0.8
    assert by.loc["instance:c-z", "requests"] == 0  # only ever rejected
    assert by.loc["constraint:kv-cache", "requests"] == 4 and by.loc["constraint:kv-cache", "label"] == (
        "✕ kv-cache · 4 removed")
    assert by.loc["rule:code", "label"] == "code · 8" and by.loc["instance:c-z", "label"] == "c-z · 0"
    assert by.loc["constraint:kv-cache", "share"] != by.loc["constraint:kv-cache", "share"]  # NaN: not requests


def test_links_split_served_fallback_and_rejected() -> None:
    nodes, links = tp.sankey_frames(EDGES, FALLBACK, REJECTED)

    assert links_by(links, nodes) == {
        ("chat", "llama", "served"): 2, ("code", "coder", "served"): 6, ("coder", "c-a", "served"): 6,
        ("llama", "l-a", "served"): 2, ("code", "coder", "fallback"): 2, ("coder", "c-b", "fallback"): 2,
        ("error-rate", "c-z", "rejected"): 4, ("kv-cache", "c-a", "rejected"): 4,
    }
    assert links["flow"].tolist() == ["served"] * 4 + ["fallback"] * 2 + ["rejected"] * 2
    row = links[(links["flow"] == "served") & (links["source_name"] == "code")].iloc[0]
    assert row["share_of_total"] == 0.6 and row["share_of_source"] == 0.75
    assert links[links["flow"] == "rejected"]["share_of_total"].isna().all()


def test_empty_traffic_gives_empty_frames() -> None:
    nodes, links = tp.sankey_frames([], [], [])
    assert nodes.empty and links.empty and list(links.columns) == list(tp.LINK_COLUMNS)


def test_decisions_links_keep_scope() -> None:
    base = {"window": "6h", "experiment_arm": "b", "model": "coder", "router_version": None, "other": "x"}
    nodes, _ = tp.sankey_frames(EDGES, base=base)
    by = nodes.set_index("node")["link"]
    assert by["rule:code"] == "/decisions?window=6h&experiment_arm=b&model=coder&rule=code"
    assert by["instance:c-a"] == "/decisions?window=6h&experiment_arm=b&model=coder&instance=c-a"
    assert by["model:llama"] == "/decisions?window=6h&experiment_arm=b&model=llama"
    rejected = tp.sankey_frames(EDGES, rejected=REJECTED, base=base)[0].set_index("node")["link"]
    assert rejected["constraint:kv-cache"] == "/decisions?window=6h&experiment_arm=b&model=coder&violation=kv-cache"
    nodes, _ = tp.sankey_frames([TrafficEdge(rule=None, model=None, instance=None, requests=1)], base=base)
    assert nodes["link"].tolist() == [  # each blank node: exactly its decisions (the field empty)
        "/decisions?window=6h&experiment_arm=b&model=coder&unset=rule",
        "/decisions?window=6h&experiment_arm=b&unset=model",
        "/decisions?window=6h&experiment_arm=b&model=coder&unset=instance"]
    assert nodes["name"].tolist() == [tp.NO_RULE, tp.NO_MODEL, tp.NO_INSTANCE]
    assert tp.decisions_link({}, rule="a b/c", model=None) == "/decisions?rule=a+b%2Fc"
    assert tp.decisions_link({}) == "/decisions"


def test_edge_table() -> None:
    table = tp.edge_table(EDGES[:3], FALLBACK)
    assert table["fallbacks"].tolist() == [0, 2, 0]
    assert table["share"].tolist() == [0.6, 0.2, 0.2]
    assert table["decisions"][1] == "/decisions?rule=code&model=coder&instance=c-b"


def test_parse_end() -> None:
    assert tp.parse_url_time("2026-11-01T10:00:00Z") == datetime(2026, 11, 1, 10, tzinfo=UTC)
    assert tp.parse_url_time("2026-11-01T10:00:00") == datetime(2026, 11, 1, 10, tzinfo=UTC)  # no zone: UTC
    assert tp.parse_url_time("300") is None  # the fleet page's ?at= (seconds back) is not an end
    assert tp.parse_url_time("yesterday") is None and tp.parse_url_time(None) is None and tp.parse_url_time("") is None


@pytest.mark.parametrize("raw", [
    "2026-06-03T10:00:00+08:00", "2026-06-03T10:00:00 08:00",  # its "+" left unencoded: decoded as a space
    "2026-06-03T10:00 08:00", "2026-06-03T02:00:00Z", "2026-06-03T02:00:00", "2026-06-03 02:00",
    "2026-06-02T22:00:00-04:00",
])
def test_an_end_pin_is_read_as_the_probes_page_reads_at(raw: str) -> None:
    """Before, ``?end=`` silently dropped an offset whose ``+`` had become a space, and a time without a zone.

    ``?end=`` and ``?at=`` are read by one parser (``parse_url_time``)."""
    assert tp.parse_url_time(raw) == datetime(2026, 6, 3, 2, tzinfo=UTC)
