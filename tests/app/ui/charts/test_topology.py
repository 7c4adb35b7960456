from __future__ import annotations

from app.ui.charts import topology as ch
from app.ui.data import topology as tp
from tests.app.ui.data.test_topology import EDGES, FALLBACK, REJECTED


def test_sankey_colours_and_hover() -> None:
    nodes, links = tp.sankey_frames(EDGES, FALLBACK, REJECTED)
    fig = ch.sankey_chart(nodes, links, "Traffic · 1h")

    (sankey,) = fig.data
    assert sankey.type == "sankey" and fig.layout.title.text == "Traffic · 1h"
    assert list(sankey.node.label) == nodes["label"].tolist()
    assert sankey.node.color[0] == ch.NODE_COLOURS["rule"] and sankey.node.color[-1] == ch.NODE_COLOURS["constraint"]
    colours = dict(zip(links["flow"], sankey.link.color, strict=True))
    assert colours == {f: ch.FLOW_COLOURS[f] for f in ("served", "fallback", "rejected")}
    assert list(sankey.link.value) == links["value"].tolist()
    hover = list(sankey.link.customdata)
    assert "code → coder: 6 requests<br>60.0% of all · 75.0% of code" in hover
    assert "code → coder: 2 fallback requests<br>20.0% of all · 25.0% of code" in hover
    assert "kv-cache removed c-a 4×<br>100.0% of this constraint's removals" in hover
    assert "rule code: 8 requests (80.0% of all)" in sankey.node.customdata
    assert "constraint kv-cache: 4 removals" in sankey.node.customdata


def test_empty_sankey_has_no_trace() -> None:
    nodes, links = tp.sankey_frames([], [], [])
    assert not ch.sankey_chart(nodes, links).data


def test_nodes_are_placed_in_columns_and_flows_carry_their_counts() -> None:
    nodes, links = tp.sankey_frames(EDGES, FALLBACK, REJECTED)
    where = ch.place(nodes, links, 400)
    kinds = nodes["kind"].tolist()
    assert {x for x, k in zip(where.x, kinds, strict=True) if k == "rule"} == {ch.COLUMN_X["rule"]}
    assert {x for x, k in zip(where.x, kinds, strict=True) if k == "instance"} == {ch.COLUMN_X["instance"]}
    assert all(0 < y < 1 for y in where.y) and all(0 < y < 1 for y in where.mid_y)
    # Within a column the nodes are stacked without overlap, in the frame's order.
    rules = [y for y, k in zip(where.y, kinds, strict=True) if k == "rule"]
    assert rules == sorted(rules)
    fig = ch.sankey_chart(nodes, links)
    (sankey,) = fig.data
    drawn = ch.place(nodes, links, fig.layout.height - fig.layout.margin.t - fig.layout.margin.b)
    assert sankey.arrangement == "fixed" and list(sankey.node.y) == drawn.y
    wide = [str(int(v)) for v, w in zip(links["value"], drawn.widths_px, strict=True) if w >= ch.MIN_LABEL_PX]
    assert sorted(a.text for a in fig.layout.annotations) == sorted(wide) and wide
