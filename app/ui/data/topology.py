"""Traffic edges and constraint removals as a Sankey's nodes and links, for the "Traffic topology" page.

Pure functions, no Streamlit, no I/O. Requests flow rule → model → instance; each link is split
into its ``served`` part and its ``fallback`` part (requests of fallback traces), and every
constraint that removed candidates adds a ``rejected`` link constraint → instance (counted in
removals, not requests). Nodes carry a link to the decisions behind them; a blank node's ("(no model)")
links to those with that field empty (``?unset=model``), not to every decision of the scope.
"""

from __future__ import annotations

import re
import urllib.parse
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import pandas as pd

from schemas.queries import UNSET_FIELDS, ConstraintStat, TrafficEdge

__all__ = [
    "FLOWS", "LINK_COLUMNS", "NODE_COLUMNS", "NO_INSTANCE", "NO_MODEL", "NO_RULE", "SCOPE_PARAMS",
    "decisions_link", "edge_table", "parse_url_time", "sankey_frames",
]

FLOWS: tuple[str, ...] = ("served", "fallback", "rejected")
NO_RULE, NO_MODEL, NO_INSTANCE = "(no rule)", "(no model)", "(not routed)"
# The sidebar's choices a link to the decisions keeps (the decisions page reads the same URL keys);
# a node's own field replaces the sidebar's (an instance node under a model filter keeps the model).
SCOPE_PARAMS: tuple[str, ...] = ("window", "end", "router_version", "experiment_arm", "model", "instance")
NODE_COLUMNS: tuple[str, ...] = ("node", "kind", "name", "label", "requests", "share", "link")
LINK_COLUMNS: tuple[str, ...] = (
    "source", "target", "flow", "value", "share_of_total", "share_of_source", "source_name", "target_name",
)
_KINDS = ("rule", "model", "instance", "constraint")
_BLANK = {"rule": NO_RULE, "model": NO_MODEL, "instance": NO_INSTANCE, "constraint": ""}


# A ``+hh:mm`` offset after a time whose ``+`` a hand-written or older link left unencoded reads back as a space.
_SPACED_OFFSET = re.compile(r"(\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) (\d{2}:?\d{2})$")


def parse_url_time(raw: str | None) -> datetime | None:
    """The moment a URL's ``?end=`` or ``?at=`` gives (ISO 8601; UTC when it names no zone), or None.

    None when the parameter is absent or not a time (the fleet page's ``?at=300``, seconds back).

    ``2026-06-03T10:00:00+08:00`` written into a link unencoded comes back as ``...10:00:00 08:00``
    (a ``+`` decodes to a space): that is the ``+08:00`` it was.
    """
    if not raw:
        return None
    try:
        at = datetime.fromisoformat(_SPACED_OFFSET.sub(r"\1+\2", raw.strip()))
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)



def decisions_link(base: Mapping[str, str | None], unset: Sequence[str] = (), **fields: str | None) -> str:
    """``/decisions?...``: the scope params of ``base`` (see :data:`SCOPE_PARAMS`) plus ``fields`` (None: left out).

    ``unset``: fields (rule, model, instance) the decisions hold no value in (``?unset=model``, a blank
    node's decisions); each replaces the scope's value of that field.
    """
    params = {k: base[k] for k in SCOPE_PARAMS if base.get(k) and k not in unset}
    params.update({k: v for k, v in fields.items() if v})
    if unset:
        params["unset"] = ",".join(n for n in UNSET_FIELDS if n in unset)
    return "/decisions" + ("?" + urllib.parse.urlencode(params) if params else "")


def _name(kind: str, value: str | None) -> str:
    return value if value else _BLANK[kind]


def _node_link(base: Mapping[str, str | None], kind: str, name: str) -> str:
    """The decisions behind a node: a constraint's violations, a blank node's empty field, else the name."""
    if kind == "constraint":
        return decisions_link(base, violation=name)
    return decisions_link(base, unset=[kind]) if name == _BLANK[kind] else decisions_link(base, **{kind: name})


def _edge_link(base: Mapping[str, str | None], e: TrafficEdge) -> str:
    """The decisions of one flow: its rule, model and instance, a blank one empty (``unset``)."""
    fields = {"rule": e.rule, "model": e.model, "instance": e.instance}
    return decisions_link(base, unset=[k for k, v in fields.items() if not v], **fields)


def sankey_frames(
    edges: Sequence[TrafficEdge], fallback_edges: Sequence[TrafficEdge] = (),
    rejected: Sequence[ConstraintStat] = (), base: Mapping[str, str | None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The nodes and links of the rule → model → instance Sankey.

    Args:
        edges: All traffic of the window (:meth:`ingest.TraceStore.traffic`).
        fallback_edges: The traffic of fallback traces only (same call with ``fallback=True``); each
            is taken out of its edge's ``served`` part (and clamped to it).
        rejected: Constraint removals; one ``rejected`` link per (constraint, instance), summed over models.
        base: The page's scope params, kept in each node's decisions link.

    Returns:
        ``(nodes, links)``: nodes (:data:`NODE_COLUMNS`, rules then models, instances, constraints,
        each by name, labelled with its count: ``code · 120``, ``✕ kv-cache · 4 removed``;
        ``requests`` is what flows through, removals for a constraint; ``share`` of all
        requests), and links (:data:`LINK_COLUMNS`, ``source``/``target`` index the nodes; no link
        of zero value).
    """
    fb: dict[tuple[str, str, str], int] = defaultdict(int)
    for e in fallback_edges:
        fb[(_name("rule", e.rule), _name("model", e.model), _name("instance", e.instance))] += e.requests
    flows: dict[tuple[str, str, str, str, str], int] = defaultdict(int)  # (kind_s, s, kind_t, t, flow)
    seen: dict[str, dict[str, int]] = {k: defaultdict(int) for k in _KINDS}
    for e in (e for e in edges if e.requests > 0):
        rule, model, inst = _name("rule", e.rule), _name("model", e.model), _name("instance", e.instance)
        back = min(fb.get((rule, model, inst), 0), e.requests)
        for flow, n in (("served", e.requests - back), ("fallback", back)):
            flows[("rule", rule, "model", model, flow)] += n
            flows[("model", model, "instance", inst, flow)] += n
        for kind, name in (("rule", rule), ("model", model), ("instance", inst)):
            seen[kind][name] += e.requests
    for s in rejected:
        flows[("constraint", s.constraint, "instance", s.instance, "rejected")] += s.removed
        seen["constraint"][s.constraint] += s.removed
        seen["instance"].setdefault(s.instance, 0)
    total = sum(e.requests for e in edges)
    nodes = [
        {"node": f"{kind}:{name}", "kind": kind, "name": name,
         "label": f"✕ {name} · {n:,} removed" if kind == "constraint" else f"{name} · {n:,}", "requests": n,
         "share": n / total if total and kind != "constraint" else None,
         "link": _node_link(base or {}, kind, name)}
        for kind in _KINDS for name, n in sorted(seen[kind].items())
    ]
    index = {row["node"]: i for i, row in enumerate(nodes)}
    out_of: dict[str, int] = defaultdict(int)
    for (ks, src, _, _, _), n in flows.items():
        out_of[f"{ks}:{src}"] += n
    links = [
        {"source": index[f"{ks}:{src}"], "target": index[f"{kt}:{t}"], "flow": flow, "value": n,
         "share_of_total": n / total if total and flow != "rejected" else None,
         "share_of_source": n / out_of[f"{ks}:{src}"], "source_name": src, "target_name": t}
        for (ks, src, kt, t, flow), n in sorted(flows.items(), key=lambda kv: (FLOWS.index(kv[0][4]), kv[0][:4]))
        if n > 0
    ]
    node_frame = pd.DataFrame(nodes, columns=list(NODE_COLUMNS)).astype({"share": "float64"})
    link_frame = pd.DataFrame(links, columns=list(LINK_COLUMNS)).astype(
        {"share_of_total": "float64", "share_of_source": "float64"})
    return node_frame, link_frame


def edge_table(
    edges: Sequence[TrafficEdge], fallback_edges: Sequence[TrafficEdge] = (),
    base: Mapping[str, str | None] | None = None,
) -> pd.DataFrame:
    """One row per (rule, model, instance): requests, fallbacks, share of all, and the decisions link."""
    fb: dict[tuple[str | None, str | None, str | None], int] = defaultdict(int)
    for e in fallback_edges:
        fb[(e.rule, e.model, e.instance)] += e.requests
    total = sum(e.requests for e in edges)
    rows = [
        {"rule": _name("rule", e.rule), "model": _name("model", e.model), "instance": _name("instance", e.instance),
         "requests": e.requests, "fallbacks": min(fb.get((e.rule, e.model, e.instance), 0), e.requests),
         "share": e.requests / total if total else None,
         "decisions": _edge_link(base or {}, e)}
        for e in edges
    ]
    columns = ["rule", "model", "instance", "requests", "fallbacks", "share", "decisions"]
    return pd.DataFrame(rows, columns=columns).astype({"share": "float64"})
