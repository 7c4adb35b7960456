"""The store's check of the traces a gateway wrote unvalidated: pydantic against the contract on Arrow columns.

The store process prepares each piece of its backlog for DuckDB: it checks the gateway's unchecked
traces (``ingest.codec.unchecked.check_traces``) and decodes them into an Arrow table. This times
that preparation (``DuckDBSink.prepare``, CPU of this process) for pieces of ``--sizes`` traces
two ways in turns on the same payloads: ``pydantic``, each trace validated into models and then
the piece decoded; ``columns``, the piece decoded once with the contract's flags and its values
tested column by column (``ingest.codec.contract``). Synthetic traces, ``--candidates`` each,
encoded as the gateway writes them (``Encoder.plain_trace``).

Last line: ``{"sizes": {N: {"pydantic_us_per_trace", "columns_us_per_trace", "ratio"}}, "trace_bytes",
"rounds"}``; each figure the median over ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from bench.synthetic import TraceFactory, plain_of
from ingest.codec import unchecked
from ingest.codec.encoder import Encoder
from ingest.duckdb.sink import DuckDBSink
from ingest.kinds import Kind
from ingest.record_sink import RecordBatch


def _prepare_s(payloads: list[bytes], columns: bool) -> float:
    """CPU seconds of one ``prepare`` of ``payloads`` as unchecked traces, the columns' check on or off."""
    unchecked.CONTRACT_FROM = 1 if columns else len(payloads) + 1
    batch = RecordBatch({Kind.TRACE_UNCHECKED: list(payloads)})
    start = time.process_time()
    prepared = DuckDBSink.prepare(batch)
    spent = time.process_time() - start
    assert not prepared.rejected and prepared.tables[Kind.TRACE][0].num_rows == len(payloads)
    return spent


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench store_check")
    p.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=[64, 256, 1000, 4000])
    p.add_argument("--candidates", type=int, default=4)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    encoder = Encoder()
    traces = TraceFactory(seed=7, n_candidates=args.candidates).traces(max(args.sizes))
    payloads = [encoder.plain_trace(plain_of(t))[-1][1] for t in traces]
    kept = unchecked.CONTRACT_FROM
    out: dict[str, Any] = {}
    try:
        for n in args.sizes:
            piece = payloads[:n]
            _prepare_s(piece, True), _prepare_s(piece, False)  # warm-up: caches, the contract built
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.rounds):
                for columns in (False, True):
                    times[columns].append(_prepare_s(piece, columns) / n * 1e6)
            old, new = statistics.median(times[False]), statistics.median(times[True])
            out[str(n)] = {"pydantic_us_per_trace": round(old, 2), "columns_us_per_trace": round(new, 2),
                           "ratio": round(new / old, 3)}
    finally:
        unchecked.CONTRACT_FROM = kept
    print(json.dumps({"sizes": out, "trace_bytes": round(statistics.mean(map(len, payloads))), "rounds": args.rounds}))
    return 0
