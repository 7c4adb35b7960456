"""``python -m bench NAME [options]``: run one benchmark; its last output line is one JSON object."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {"decide": "bench.decide", "gateway": "bench.gateway", "sim": "bench.sim", "ingest": "bench.ingest",
              "lookup": "bench.lookup", "probes": "bench.probes", "app": "bench.app",
              "shadow": "bench.shadow", "compare": "bench.compare", "replay": "bench.replay",
              "analyse": "bench.analyse", "intents": "bench.intent_sets", "resilience": "bench.resilience",
              "soak": "bench.soak", "store_check": "bench.store_check"}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m bench {{{','.join(BENCHMARKS)}}} [options]", file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return int(module.main(argv[1:]))


raise SystemExit(main(sys.argv[1:]))
