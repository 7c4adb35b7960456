from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.ui.data import probes as pd_
from app.ui.limits import Limits
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.probes import LatencyProbeSettings, ProbeSettings
from schemas.probe import ProbeResult
from tests.app import stub_trace_api as stub

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LIMITS = Limits(constraints=())  # the configuration's defaults: semantic 0.65, latency ±20%


@pytest.fixture
def results() -> list[ProbeResult]:
    return stub.sample_probe_results(NOW)


def test_window_span_and_unknown_key() -> None:
    assert pd_.window_span("15m", NOW) == (NOW - timedelta(minutes=15), NOW)
    assert pd_.window_span("24h", NOW)[0] == NOW - timedelta(hours=24)
    assert pd_.window_span("bogus", NOW)[0] == NOW - timedelta(hours=1)


def test_instance_link() -> None:
    assert pd_.instance_link("vllm a/1") == "?instance=vllm+a%2F1"
    assert pd_.instance_link("a", NOW) == "?instance=a&at=" + NOW.isoformat().replace(":", "%3A").replace("+", "%2B")
    assert pd_.instance_link(None) is None and pd_.instance_link("") is None


def test_last_verdicts_one_row_per_instance_and_kind(results: list[ProbeResult]) -> None:
    grid = pd_.last_verdicts(results, limits=LIMITS)

    assert list(grid.columns) == list(pd_.GRID_COLUMNS)
    assert len(grid) == 3 * 3
    cell = grid.set_index(["instance", "kind"])
    assert cell.loc[(stub.DRIFTING_INSTANCE, "semantic"), "verdict"] == "failed"
    assert cell.loc[(stub.DRIFTING_INSTANCE, "semantic"), "value"] == pytest.approx(0.31)
    assert cell.loc[(stub.DRIFTING_INSTANCE, "semantic"), "reading"] == "0.310 / 0.650"
    assert cell.loc[(stub.DRIFTING_INSTANCE, "semantic"), "limit"] == "probes.semantic.threshold"
    assert cell.loc[(stub.DRIFTING_INSTANCE, "latency"), "reading"] == "1,275 ms / 640–960 ms"
    assert cell.loc[(stub.DRIFTING_INSTANCE, "syntax"), "reading"] == "valid"
    assert cell.loc[(stub.SYNTAX_ONLY_INSTANCE, "semantic"), "reading"] == "—"
    assert cell.loc[(stub.DRIFTING_INSTANCE, "latency"), "verdict"] == "degraded"
    assert cell.loc[(stub.DRIFTING_INSTANCE, "syntax"), "verdict"] == "ok"
    assert cell.loc[(stub.SYNTAX_ONLY_INSTANCE, "semantic"), "verdict"] == pd_.NO_DATA
    assert cell.loc[(stub.HEALTHY_INSTANCE, "latency"), "ts"] == NOW - timedelta(seconds=30)
    assert cell.loc[(stub.HEALTHY_INSTANCE, "latency"), "link"] == f"?instance={stub.HEALTHY_INSTANCE}"
    assert grid["held"].isna().all()


def test_last_verdicts_takes_the_latest_whatever_the_input_order(results: list[ProbeResult]) -> None:
    assert pd_.last_verdicts(list(reversed(results)), limits=LIMITS).equals(pd_.last_verdicts(results, limits=LIMITS))


def test_held_verdicts_from_the_gateway_shape_and_an_id_keyed_object() -> None:
    state = stub.sample_router_state(NOW)
    held = pd_.held_verdicts(state)
    assert set(held) == {(stub.DRIFTING_INSTANCE, "semantic"), (stub.DRIFTING_INSTANCE, "latency")}
    assert held[(stub.DRIFTING_INSTANCE, "semantic")].verdict == ProbeVerdict.FAILED

    keyed = {s["instance"]: s for s in state["instances"]} | {"scrape": {"stalled": False}, "quality": []}
    assert pd_.held_verdicts(keyed) == held
    assert pd_.held_verdicts(None) == {} and pd_.held_verdicts({"instances": "nope"}) == {}


def test_held_verdicts_skip_invalid_statuses() -> None:
    state = {"instances": [{"instance": "x", "probes": [{"kind": "bogus"}, {"kind": "syntax", "verdict": "ok",
                                                                          "since": NOW.isoformat()}]}]}
    assert list(pd_.held_verdicts(state)) == [("x", "syntax")]


def test_router_only_instance_gets_rows_and_held_columns(results: list[ProbeResult]) -> None:
    held = pd_.held_verdicts(stub.sample_router_state(NOW))
    held[("vllm-z-9", "syntax")] = held[(stub.DRIFTING_INSTANCE, "semantic")].model_copy(update={"kind": "syntax"})
    grid = pd_.last_verdicts(results, held, limits=LIMITS).set_index(["instance", "kind"])
    assert grid.loc[(stub.DRIFTING_INSTANCE, "semantic"), "held"] == "failed"
    assert grid.loc[(stub.DRIFTING_INSTANCE, "semantic"), "held_since"] == NOW - timedelta(minutes=1)
    assert grid.loc[("vllm-z-9", "syntax"), "verdict"] == pd_.NO_DATA


def test_instances_worst_first(results: list[ProbeResult]) -> None:
    order = pd_.instances_worst_first(pd_.last_verdicts(results, limits=LIMITS))
    assert order == [stub.DRIFTING_INSTANCE, stub.SYNTAX_ONLY_INSTANCE, stub.HEALTHY_INSTANCE]
    assert pd_.instances_worst_first(pd_.last_verdicts([], limits=LIMITS)) == []


def test_similarity_series(results: list[ProbeResult]) -> None:
    frame = pd_.similarity_series(list(reversed(results)), stub.DRIFTING_INSTANCE, limits=LIMITS)
    assert list(frame.columns) == list(pd_.SIMILARITY_COLUMNS)
    assert len(frame) == 20 and frame["ts"].is_monotonic_increasing
    assert frame["threshold"].eq(0.65).all()
    assert frame["verdict"].tolist()[-4:] == ["failed"] * 4
    assert pd_.similarity_series(results, stub.SYNTAX_ONLY_INSTANCE, limits=LIMITS).empty


def test_latency_series_band_from_the_running_tolerance(results: list[ProbeResult]) -> None:
    frame = pd_.latency_series(results, stub.DRIFTING_INSTANCE, limits=LIMITS)
    assert list(frame.columns) == list(pd_.LATENCY_COLUMNS)
    first = frame.iloc[0]
    assert (first["baseline"], first["band_low"], first["band_high"]) == pytest.approx((800, 640, 960))
    assert frame["verdict"].iloc[-1] == "degraded"
    assert frame["reading"].iloc[-1] == "1,275 ms / 640–960 ms"

    # The result's own threshold (from the prober's tolerance then) does not set the band: the configuration does.
    bare = ProbeResult(probe_id="p", ts=NOW, instance="i", model="m", kind=ProbeKind.LATENCY,
                       verdict=ProbeVerdict.OK, value=140.0, baseline=100.0, threshold=120.0)
    wide = Limits(constraints=(), probes=ProbeSettings(latency=LatencyProbeSettings(tolerance=0.5)))
    row = pd_.latency_series([bare], "i", limits=wide).iloc[0]
    assert (row["band_low"], row["band_high"]) == pytest.approx((50, 150))
    assert row["verdict"] == "ok" and row["reading"] == "140 ms / 50–150 ms"
    tight = pd_.latency_series([bare], "i", limits=LIMITS).iloc[0]
    assert tight["verdict"] == "degraded" and tight["reading"] == "140 ms / 80–120 ms"
    unlearned = bare.model_copy(update={"baseline": None})
    row = pd_.latency_series([unlearned], "i", limits=LIMITS).iloc[0]
    assert row.isna()[["baseline", "band_low", "band_high"]].all()


def test_active_alerts_firing_first() -> None:
    payload = stub.sample_alerts(NOW)
    pending = {**payload["alerts"][0], "name": "AAA", "state": "pending", "instance": None}
    frame = pd_.active_alerts({"alerts": [pending, *payload["alerts"], "junk"]})
    assert list(frame.columns) == list(pd_.ACTIVE_ALERT_COLUMNS)
    assert frame["name"].tolist() == [stub.ALERT_RULE, "AAA"]
    assert frame["link"].iloc[0] == f"?instance={stub.DRIFTING_INSTANCE}" and frame["link"].isna().iloc[1]
    assert pd_.active_alert_lines(frame) == [
        f"- :red[**FIRING**] **{stub.ALERT_RULE}** (critical) on [`{stub.DRIFTING_INSTANCE}`]"
        f"(probes?instance={stub.DRIFTING_INSTANCE}): semantic similarity below 0.65",
        "- :orange[**PENDING**] **AAA** (critical): semantic similarity below 0.65",
    ]
    assert pd_.active_alerts(None).empty and pd_.active_alerts({"alerts": []}).empty
    assert pd_.active_alert_lines(pd_.active_alerts(None)) == []


def test_recent_alerts_newest_first_and_split() -> None:
    frame = pd_.recent_alerts(stub.sample_events(NOW))
    assert list(frame.columns) == list(pd_.RECENT_ALERT_COLUMNS)
    assert frame["action"].tolist() == ["firing", "resolved", "firing"]
    assert frame["rule"].tolist() == [stub.ALERT_RULE, "LatencyCreep", "LatencyCreep"]
    # the alert rule's severity, as the active alerts show it: not the event's level (error, info)
    assert frame["severity"].tolist() == ["critical", "warning", "warning"]
    resolved_alone = pd_.recent_alerts([e for e in stub.sample_events(NOW) if e.message.startswith("resolved")])
    assert resolved_alone["severity"].tolist() == ["—"]  # its firing fell outside the list
    newest = max(e.ts for e in stub.sample_events(NOW) if e.kind == "alert")  # an alert links to its moment
    assert frame["link"].iloc[0] == pd_.instance_link(stub.DRIFTING_INSTANCE, newest)
    assert frame["link"].iloc[0].startswith(f"?instance={stub.DRIFTING_INSTANCE}&at=")
    odd = stub.sample_events(NOW)[0].model_copy(update={"message": "no colon here"})
    assert pd_.recent_alerts([odd])[["action", "rule"]].iloc[0].tolist() == ["", ""]


def paged(items: list[ProbeResult], page: int, calls: list[tuple[datetime, datetime]]):  # type: ignore[no-untyped-def]
    ordered = sorted(items, key=lambda r: r.ts)

    def fetch(start: datetime, end: datetime) -> list[ProbeResult]:
        calls.append((start, end))
        return [r for r in ordered if start <= r.ts < end][:page]

    return fetch


def read(fetch, max_pages: int, chunks: int = 1):  # type: ignore[no-untyped-def]
    return pd_.read_newest(fetch, NOW - timedelta(hours=1), NOW, key=lambda r: r.probe_id, page=25,
                           max_pages=max_pages, chunks=chunks)


@pytest.mark.parametrize("chunks", [1, 4])
def test_read_newest_reads_everything_with_budget(results: list[ProbeResult], chunks: int) -> None:
    calls: list[tuple[datetime, datetime]] = []
    got, since = read(paged(results, 25, calls), max_pages=50, chunks=chunks)
    assert since == NOW - timedelta(hours=1) and len(calls) > chunks
    assert [r.probe_id for r in got] == [r.probe_id for r in sorted(results, key=lambda r: r.ts)]
    assert calls[0][1] == NOW


def test_read_newest_out_of_budget_keeps_the_newest_part(results: list[ProbeResult]) -> None:
    calls: list[tuple[datetime, datetime]] = []
    # 20 rounds of 7 results in the last 10 minutes, all in the newest 15-minute chunk: a page of 25
    # ends in the 4th round and the next starts there, so rounds 0, 3, ..., 18: 7 pages.
    got, since = read(paged(results, 25, calls), max_pages=7, chunks=4)
    assert since == NOW - timedelta(minutes=15) and len(got) == len(results)
    got, since = read(paged(results, 25, []), max_pages=3, chunks=4)
    assert since == NOW and 0 < len(got) < len(results)


def test_read_newest_stops_when_one_timestamp_fills_a_page(results: list[ProbeResult]) -> None:
    same = [r.model_copy(update={"ts": NOW - timedelta(minutes=1), "probe_id": f"s{i}"}) for i, r in enumerate(results)]
    calls: list[tuple[datetime, datetime]] = []
    got, since = read(paged(same, 25, calls), max_pages=10)
    assert since == NOW and len(got) == 25 and len(calls) == 2


def test_an_active_alert_links_to_the_probes_page_keeping_the_window() -> None:
    """On the overview a relative ``?instance=`` reopened the overview: the link names the Probes page."""
    frame = pd_.active_alerts(stub.sample_alerts(NOW))
    (line,) = pd_.active_alert_lines(frame, "15m")
    assert f"[`{stub.DRIFTING_INSTANCE}`](probes?instance={stub.DRIFTING_INSTANCE}&window=15m)" in line
    (bare,) = pd_.active_alert_lines(frame)
    assert f"(probes?instance={stub.DRIFTING_INSTANCE})" in bare
    assert pd_.probes_link("vllm a/1", "1h") == "probes?instance=vllm+a%2F1&window=1h"


def test_the_probes_windows_include_the_sidebar_s() -> None:
    from app.ui.sidebar import WINDOWS

    assert list(pd_.WINDOWS) == list(WINDOWS)
    assert pd_.window_span("7d", NOW) == (NOW - WINDOWS["7d"], NOW)
