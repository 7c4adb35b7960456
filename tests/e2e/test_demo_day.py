"""``routelens demo --speed 5``: one scripted day in 48 s, and each of its events really happened.

The demo runs as a user runs it (the shipped ``routelens.yaml``, the app included), one day long;
then the trace file it leaves is read: the KV constraint took the pressured instance out, held it
out inside its hysteresis band and let it back; the probes took the drifting instance out and let
it back; the crashed instance's breaker opened, half-opened and closed; a rule of the policy routed
a share of the traffic; the two arms differ; the shadow decided; feedback marked misroutes. Each of
these was printed as it happened, with a page of the app that shows it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from app.reader import open_reader
from app.run.demo_day import DEFAULT_SCRIPT
from ingest.duckdb.store import OFFLINE
from schemas.experiments import CompareQuery
from schemas.queries import TraceFilter
from sim.day import fleet_instance_of
from sim.scenarios import load_scenario
from tests.e2e.conftest import ROOT
from tests.e2e.demo_run import start_demo

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
SPEED = 5
PAGES = set(re.findall(r'url_path="([a-z_]+)"', (ROOT / "app" / "ui" / "streamlit_app.py").read_text()))
LINE = re.compile(r"^\d\d:\d\d:\d\d (?P<what>.+): (?P<url>http://\S+)$", re.M)


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the demo for one day at ``--speed 5``; its output, the instances each fault hit and the trace file."""
    tmp = tmp_path_factory.mktemp("demo-day")
    script = load_scenario(DEFAULT_SCRIPT)
    length = script.duration_s / SPEED
    run = start_demo(tmp, "--speed", str(SPEED), "--duration", str(length + 3))
    try:
        assert run.proc.proc.wait(length + 150) == 0, run.output
    finally:
        run.proc.stop()
    where = fleet_instance_of(script, list(run.instances))
    faulty = {f.kind.value: where(f) for f in script.faults}
    return {"out": run.output, "app": run.app, "faulty": faulty, "db": tmp / "traces.duckdb"}


def lines(day: dict[str, Any], *needles: str) -> list[tuple[str, str]]:
    """The printed event lines whose text has every needle: (what, url)."""
    return [(m["what"], m["url"]) for m in LINE.finditer(day["out"]) if all(n in m["what"] for n in needles)]


def page_of(url: str, app: str) -> str:
    assert url.startswith(app + "/"), url
    return url[len(app) + 1:].split("?", 1)[0]


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    # the store's own settings: DuckDB refuses a second connection to an open file with others (open_reader's)
    con = duckdb.connect(str(db), read_only=True, config=dict(OFFLINE))
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def candidate_verdicts(db: Path, instance: str, constraint: str) -> list[tuple[datetime, bool, float | None]]:
    """Per trace, in time order: was ``instance`` held out by ``constraint`` (hard), and the value it read."""
    found = rows(db, """SELECT ts, c.violations FROM (SELECT ts, unnest(candidates) AS c FROM traces)
                        WHERE c.instance = ? ORDER BY ts""", instance)
    out = []
    for ts, violations in found:
        mine = [v for v in violations or [] if v["constraint"] == constraint]
        out.append((ts, any(v["severity"] == "hard" for v in mine), mine[0]["value"] if mine else None))
    return out


def test_the_day_began_once_the_gateway_routed_without_waiting(day) -> None:
    """No request of the day waited for the semantic intents' first fit (a first run's: a minute; a cached one's
    took 20 s under load): started before it, the day's first requests all waited, then came at once."""
    ((waited, longest),) = rows(day["db"], "SELECT count(policy.intent.waited_s), max(policy.intent.waited_s) "
                                           "FROM traces")
    assert waited == 0, f"{waited} decisions waited for the intents' first fit, up to {longest} s"
    out = day["out"]
    if "fitting the semantic intents" in out:  # said only when the fit was still going on once the parts were up
        assert out.index("fitting the semantic intents") < out.index("semantic intents ready after") \
            < out.index(" day 1 begins"), out


def test_every_line_names_a_page_of_the_app(day) -> None:
    said = list(LINE.finditer(day["out"]))
    assert len(said) >= 10, day["out"]
    assert {page_of(m["url"], day["app"]) for m in said} <= PAGES


def test_the_kv_constraint_took_the_pressured_instance_out_held_it_in_its_band_and_let_it_back(day) -> None:
    inst = day["faulty"]["kv-pressure"]
    verdicts = candidate_verdicts(day["db"], inst, "kv-cache")
    out = [i for i, (_, is_out, _) in enumerate(verdicts) if is_out]
    assert out, "no decision saw the instance out"
    # hysteresis: decisions that found it out while its usage was already back within the 0.85 threshold
    assert any(0.80 < (value or 0) <= 0.85 for _, is_out, value in verdicts if is_out)
    back = [ts for ts, is_out, _ in verdicts[out[-1] + 1:] if not is_out]
    assert back, "it never came back"
    served = rows(day["db"], "SELECT count(*) FROM traces WHERE selected_instance = ? AND ts > ?", inst, back[0])
    assert served[0][0] > 0
    assert [page_of(u, day["app"]) for _, u in lines(day, inst, "broke kv-cache")] == ["constraints"]
    assert lines(day, inst, "stays out", "hysteresis") and lines(day, inst, "back in the feasible set (kv-cache)")


def test_the_probes_took_the_drifting_instance_out_alerted_and_let_it_back(day) -> None:
    inst = day["faulty"]["drift"]
    store = open_reader(db=day["db"])
    start, end = datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC)
    events = [e for e in store.events(start, end, kind="probe_verdict") if e.instance == inst
              and e.message.startswith("semantic")]
    verdicts = [e.message.split()[3].rstrip(":") for e in sorted(events, key=lambda e: e.ts)]
    assert "failed" in verdicts and verdicts[-1] == "ok", verdicts
    alerts = [e.message for e in store.events(start, end, kind="alert") if e.instance == inst]
    assert any(m.startswith("firing: RouteLensProbeSemanticDrift") for m in alerts), alerts
    probe = candidate_verdicts(day["db"], inst, "probe")
    first_out = next(i for i, (_, is_out, _) in enumerate(probe) if is_out)
    assert any(not is_out for _, is_out, _ in probe[first_out:]), "excluded, never readmitted"
    for needle in ("semantic probe failed", "semantic probe passes again"):
        assert [page_of(u, day["app"]) for _, u in lines(day, inst, needle)] == ["probes"]
    assert lines(day, "alert RouteLensProbeSemanticDrift firing on " + inst)


def test_the_crashed_instance_breaker_opened_half_opened_and_closed(day) -> None:
    inst = day["faulty"]["crash"]
    store = open_reader(db=day["db"])
    events = [e for e in store.events(datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC), kind="breaker")
              if e.instance == inst]
    moves = [re.search(r": (\w+) -> (\w+)", e.message).groups() for e in sorted(events, key=lambda e: e.ts)]
    assert ("half_open", "closed") in moves, moves
    first_day = moves[:moves.index(("half_open", "closed")) + 1]  # the next day's crash may have begun at the end
    assert first_day[0] == ("closed", "open") and ("open", "half_open") in first_day, moves
    printed = lines(day, f"{inst} breaker ")
    assert printed and printed[0][0].startswith(f"{inst} breaker closed -> open ("), printed
    assert {page_of(u, day["app"]) for _, u in printed} == {"fleet"} and len(printed) >= 3
    # A crash is no drift (issue 33): its failed semantic probes raise the health probe's alert, not drift's.
    alerts = [e.message for e in store.events(datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC),
                                              kind="alert") if e.instance == inst]
    assert any(m.startswith("firing: RouteLensProbeSyntaxFailed") for m in alerts), alerts
    assert not [m for m in alerts if "SemanticDrift" in m], alerts
    assert not lines(day, f"alert RouteLensProbeSemanticDrift firing on {inst}")


def test_a_rule_routed_a_share_and_the_shadow_decided(day) -> None:
    ((ruled, total, shadowed, flipped),) = rows(day["db"], """
        SELECT count(*) FILTER (WHERE rule = 'long_context_priority'), count(*),
               count(*) FILTER (WHERE shadow IS NOT NULL), count(*) FILTER (WHERE shadow.flipped)
        FROM traces""")
    assert 0 < ruled < total and shadowed > 0 and flipped > 0
    assert [page_of(u, day["app"]) for _, u in lines(day, "rule long_context_priority routes")][:1] == ["decisions"]
    assert [page_of(u, day["app"]) for _, u in lines(day, "shadow ", "beside the live policy")][:1] == ["experiments"]


def test_the_two_arms_differ_and_feedback_marked_misroutes(day) -> None:
    store = open_reader(db=day["db"])
    report = store.compare(CompareQuery(a="balanced", b="seed-score", by="arm",
                                        start=datetime.now(UTC) - timedelta(hours=1), end=datetime.now(UTC)))
    assert report.n_a > 100 and report.n_b > 100
    assert any(m.significant_after_correction for m in report.metrics.values()), report.verdict
    misroutes = store.misroutes(TraceFilter(start=datetime.now(UTC) - timedelta(hours=1), end=datetime.now(UTC)),
                                limit=10)
    assert misroutes, "no misroute feedback stored"
    printed = lines(day, "feedback marks", "a misroute")
    assert printed and page_of(printed[0][1], day["app"]) == "trace"
    assert lines(day, "arms balanced vs seed-score") and all(
        page_of(u, day["app"]) == "experiments" for _, u in lines(day, "arms balanced vs seed-score"))



def test_a_script_that_names_an_instance_the_fleet_lacks_is_refused_before_anything_starts(tmp_path: Path) -> None:
    script = tmp_path / "day.yaml"
    script.write_text("name: d\nduration_s: 10\nfaults: [{at_s: 1, instance: v4-32k-0, kind: crash}]\n")
    done = subprocess.run([sys.executable, "-m", "app", "demo", "--config", str(ROOT / "routelens.yaml"),
                           "--data-dir", str(tmp_path), "--script", str(script), "--no-app"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no instance 'v4-32k-0' in the fleet" in done.stderr, done.stderr
    assert not (tmp_path / "demo-config.yaml").exists() and not (tmp_path / "traces.duckdb").exists()
