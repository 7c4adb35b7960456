"""Counterfactual replay over a time range, summed up in a :class:`schemas.replay_report.ReplayReport`.

Every stored trace of ``[since, until)`` matching a filter is re-decided under another policy.

From a DuckDB file the traces are read in bulk (:mod:`app.experiments.bulk`) and, past
``PARALLEL_MIN`` traces, in one process per core over time ranges of equal size; through a
server's query API (:class:`ingest.trace_store.TraceStore`) they are paged with ``search`` and
each replayable one fetched with ``get``. Either way each trace is re-decided by
:class:`app.experiments.replay_memo.MemoReplayer` (a :class:`~app.experiments.replayer.Replayer`
sharing the filter and score work of traces with the same decision inputs; bit-identical decisions)
and counted by :class:`app.experiments.tally.Tally`, with the collector tuned for the duration.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from app.experiments import bulk
from app.experiments._collector import fewer_collections
from app.experiments.by_range import run_by_range
from app.experiments.replay_memo import MemoReplayer
from app.experiments.replayer import Replayer
from app.experiments.rows import SAMPLED_OUT, ReplayRow, misroutes_of, row_of
from app.experiments.tally import Tally
from ingest import TraceStore, ips_report, wilson_interval
from router_core import NotReplayable, build_policy, builtin_registry
from schemas.config import RouteLensConfig
from schemas.queries import TraceFilter
from schemas.replay_report import FlipCause, PredictedDelta, ReplayReport

__all__ = ["COST_BASIS", "LATENCY_BASIS", "PARALLEL_MIN", "Progress", "replay_rows", "replay_range"]

PARALLEL_MIN = 50_000
COST_BASIS = ("price of each instance in the replay policy's fleet at the trace's time: cost.base, plus with "
              "token prices the request's estimated input and expected completion tokens at them, times "
              "cost.surge_multiplier in the policy's routing.peak_hours (local hours in routing.timezone), "
              "as the cost scorer weighs it; a stored instance missing from that fleet is priced at its stored "
              "outcome cost")
LATENCY_BASIS = ("the latency scorer's prediction from each candidate's recorded state: the observed window p50 "
                 "(>= 5 requests) else the model profile's latency_ms, scaled by queue and running beyond "
                 "max_concurrency, under the replay policy's model profiles")
Progress = Callable[[int, int], None]  # (done, total)


def replay_rows(rows: Iterator[list[ReplayRow]], replayer: Replayer, tally: Tally,
                progress: Callable[[int], None] | None = None) -> Tally:
    """Re-decide each replayable row and count it (and count the others with their reason)."""
    for batch in rows:
        for row in batch:
            if row.missing is not None:
                tally.skip(row.missing)
                continue
            try:
                got = replayer.decide(row)
            except NotReplayable as exc:  # its rule is not in the replay policy's rule set
                tally.skip(str(exc))
                continue
            tally.add(row, got, replayer)
        if progress is not None:
            progress(len(batch))
    return tally


def _db_part(path: Path, flt: TraceFilter, config: RouteLensConfig, done: Any) -> Tally:
    """Replay one time range of a file (a worker process, or the caller itself)."""
    with fewer_collections():
        return _db_range(path, flt, config, done)


def _db_range(path: Path, flt: TraceFilter, config: RouteLensConfig, done: Any) -> Tally:
    started = time.process_time()
    con = bulk.open_file(path)
    try:
        replayer = MemoReplayer(build_policy(config, builtin_registry()))

        def tick(k: int) -> None:
            with done.get_lock():
                done.value += k

        tally = replay_rows(bulk.read_rows(con, flt), replayer, Tally(), tick)
    finally:
        con.close()
    tally.cpu_s = time.process_time() - started
    return tally


def _from_db(path: Path, flt: TraceFilter, config: RouteLensConfig, progress: Progress | None,
             workers: int | None) -> Tally:
    done = mp.get_context("fork").Value("q", 0)  # traces replayed, by every process (the progress line)
    tallies = run_by_range(path, flt, partial(_db_part, config=config, done=done), workers=workers,
                           parallel_min=PARALLEL_MIN,
                           waiting=None if progress is None else lambda total: progress(done.value, total))
    tally = Tally()
    for part in tallies:  # in time order, whichever finished first: the sums come out the same every run
        tally.merge(part)
    return tally


def _pages(store: TraceStore, flt: TraceFilter, total_hint: list[int]) -> Iterator[list[ReplayRow]]:
    """Rows through the query API: pages of summaries, each replayable trace fetched whole, with its feedback."""
    cursor: str | None = None
    while True:
        page = store.search(flt, limit=1000, cursor=cursor)
        found = {item.request_id: store.get(item.request_id) if item.detail else None for item in page.items}
        wrong = misroutes_of(store, flt, [t for t in found.values() if t is not None])
        rows = []
        for item in page.items:
            trace = found[item.request_id]
            if trace is None:
                rows.append(ReplayRow(item.request_id, item.ts, None, None, item.rule, item.selected_model,
                                      item.selected_instance, {}, (), [], (), item.cost, SAMPLED_OUT))
            else:
                rows.append(row_of(trace, misroute=wrong.get(item.request_id)))
        total_hint[0] += len(rows)
        yield rows
        cursor = page.next_cursor
        if cursor is None:
            return


def replay_range(source: Path | TraceStore, since: datetime, until: datetime, flt: TraceFilter,
                 config: RouteLensConfig, *, policy_name: str = "", progress: Progress | None = None,
                 workers: int | None = None) -> ReplayReport:
    """Re-decide every stored trace of ``[since, until)`` matching ``flt`` under ``config``'s policy.

    Args:
        source: A DuckDB trace file no process writes, or a store (a server's query API).
        since: Inclusive start (aware).
        until: Exclusive end (aware).
        flt: Other fields to match; its ``start``/``end`` are replaced by the window.
        config: The policy to replay under (its fleet, constraints, scoring, models, router).
        policy_name: The policy file, named in the report.
        progress: Called with ``(done, total)`` now and then.
        workers: Processes for a file (default: one per core, up to 2, from ``PARALLEL_MIN`` traces).
    """
    started = time.perf_counter()
    flt = flt.model_copy(update={"start": since, "end": until})
    policy = build_policy(config, builtin_registry())
    if isinstance(source, Path):
        tally = _from_db(source, flt, config, progress, workers)
    else:
        seen = [0]

        def tick(_: int) -> None:
            if progress is not None:
                progress(seen[0], 0)

        cpu = time.process_time()
        with fewer_collections():
            tally = replay_rows(_pages(source, flt, seen), MemoReplayer(policy), Tally(), tick)
        tally.cpu_s = time.process_time() - cpu
    return report_of(tally, since=since, until=until, flt=flt, policy_name=policy_name, policy_hash=policy.hash,
                     elapsed_s=time.perf_counter() - started)


def _delta(d: Any, basis: str) -> PredictedDelta:
    """The delta of ``d`` (a tally's), its basis naming the flips it leaves out and why (never a silent gap)."""
    total = d.new_sum - d.old_sum
    if d.left_out:
        n = sum(d.left_out.values())
        basis += f"; leaves out {n:,} flip{'' if n == 1 else 's'}: " + \
            ", ".join(f"{why} ({k:,})" for why, k in sorted(d.left_out.items(), key=lambda kv: (-kv[1], kv[0])))
    return PredictedDelta(
        basis=basis, requests=d.requests, flipped=d.flipped, old_mean=d.old_sum / d.flipped if d.flipped else None,
        new_mean=d.new_sum / d.flipped if d.flipped else None,
        delta_mean=total / d.requests if d.requests else None, delta_total=total,
    )


def _by_count(counts: Counter[str]) -> dict[str, int]:
    """Most first, then by name: the order does not depend on which trace came first, nor on the processes."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def report_of(tally: Tally, *, since: datetime, until: datetime, flt: TraceFilter, policy_name: str,
              policy_hash: str, elapsed_s: float = 0.0) -> ReplayReport:
    """Turn the counts of a replay into its report (rates, Wilson interval, ordered causes)."""
    shown = {k: str(v.value if hasattr(v, "value") else v)
             for k, v in flt.model_dump(exclude_none=True, exclude={"start", "end"}).items()}
    causes = [FlipCause(kind=k, name=n, flips=c) for (k, n), c in
              sorted(tally.causes.items(), key=lambda kv: (-kv[1], kv[0]))]
    rate = tally.flips / tally.replayed if tally.replayed else None
    return ReplayReport(
        since=since, until=until, policy=policy_name, policy_hash=policy_hash, filter=shown, n=tally.n,
        replayed=tally.replayed, not_replayable=tally.n - tally.replayed,
        not_replayable_reasons=_by_count(tally.missing),
        flips=tally.flips, model_flips=tally.model_flips, flip_rate=rate,
        flip_ci=wilson_interval(tally.flips, tally.replayed) if tally.replayed else None,
        matrix={k: _by_count(v) for k, v in sorted(tally.matrix.items())},
        instance_matrix={k: _by_count(v) for k, v in sorted(tally.instances.items())},
        causes=causes, cost=_delta(tally.cost, COST_BASIS), latency=_delta(tally.latency, LATENCY_BASIS),
        elapsed_s=elapsed_s, traces_per_s=tally.n / elapsed_s if elapsed_s > 0 else None, cpu_s=tally.cpu_s,
        ips=ips_report(tally.ips_logged, tally.ips_match, tally.ips_cost, tally.ips_misroute,
                       unlogged=tally.ips_unlogged),
    )
