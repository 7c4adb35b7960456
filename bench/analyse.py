"""Request analysis cost of semantic intents: p99 per path with 20 routes x 50 examples, and fit times.

Routes are synthetic from the vendored Home Assistant sets (data/intents): the English and Chinese
training routes, 50 examples each, the first 20 routes. Queries are the held-out cases. Each query
is classified as the router classifies it (``classify``) and timed under the path it took: the
fast path (char n-gram TF-IDF + logistic regression, when it clears its calibrated accept
threshold), the early exit (MiniLM's first ``routing.intents.early_exit_layers`` layers and a joint
model over them, when it clears its calibrated exit threshold; ``--early-layers``) or the embedding
path (all of MiniLM, one torch thread, int8 unless ``--precision fp32``, and the joint linear model
over the embedding and the n-grams). Then every query is also timed on the fast path alone and on
the slow path (early exit or last layer) whatever path it would take (``*_all_*``), and 40 long
queries (30 English cases joined, about 190 words: a question with its context) on the slow path
(``embedding_long_*``), where MiniLM reads ``routing.intents.embedding_max_tokens`` WordPiece
tokens (``--max-tokens``).
Targets: the path most queries take <= 2 ms p99, the slow path <= 25 ms p99.

With it, what a 50-rule routing matrix adds to ``decide()`` p99 (target <= 0.1 ms; :mod:`bench.matrix`).

Last line: ``{"routes", "examples", "paths", "fast_p50_ms", "fast_p99_ms", "embedding_precision", "embedding_p50_ms",
"embedding_p99_ms", "early_p50_ms", "early_p99_ms", "early_layers", "fast_all_p99_ms", "embedding_all_p99_ms",
"embedding_long_p50_ms", "embedding_long_p99_ms", "embedding_max_tokens", "fit_fast_s", "fit_embedding_s",
"calibration", ..., "decide_p99_ms", "matrix_none_added_p99_ms", "matrix_last_added_p99_ms"}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.matrix import matrix_figures

DATA = Path(__file__).resolve().parents[1] / "data" / "intents"


def synthetic_routes(n_routes: int = 20, per_route: int = 50) -> tuple[dict[str, list[str]], list[str]]:
    """``n_routes`` routes of ``per_route`` examples from the vendored sets, and the held-out query texts."""
    from router_core.intents import load_routes

    routes: dict[str, list[str]] = {}
    queries: list[str] = []
    for tag in ("ha_en", "ha_zh"):
        for name, texts in load_routes(DATA / f"{tag}_train.yaml").items():
            if len(routes) < n_routes:
                routes[f"{tag}.{name}"] = texts[:per_route]
        queries += [json.loads(line)["text"] for line in (DATA / f"{tag}_test.jsonl").read_text("utf-8").splitlines()]
    return routes, queries


def _p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3)


def _timed(fn: Any, queries: list[str]) -> tuple[list[float], list[Any]]:
    times, out = [], []
    for q in queries:
        s = time.perf_counter()
        out.append(fn(q))
        times.append((time.perf_counter() - s) * 1e3)
    return times, out


def analysis_figures(n_routes: int, per_route: int, n_queries: int, precision: str = "int8",
                     max_tokens: int | None = None, early_layers: int | None = None) -> dict[str, Any]:
    """Fit both paths and time each query on the path it takes, then on each path alone."""
    from router_core.intents import IntentClassifier
    from schemas.config.intents import IntentSettings

    routes, queries = synthetic_routes(n_routes, per_route)
    queries = queries[:n_queries]
    t0 = time.perf_counter()
    settings = IntentSettings.model_validate({"routes": "<bench>", "embedding_precision": precision}
                                             | ({} if max_tokens is None else {"embedding_max_tokens": max_tokens})
                                             | ({} if early_layers is None else {"early_exit_layers": early_layers}))
    clf = IntentClassifier(routes, settings, cache_path=None)
    fit_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    clf.fit_embedding()
    fit_emb = time.perf_counter() - t0
    times, verdicts = _timed(clf.classify, queries)
    by_path: dict[str, list[float]] = {"fast": [], "early": [], "embedding": []}
    for ms, v in zip(times, verdicts, strict=True):
        by_path[v.path].append(ms)
    fast_all, _ = _timed(lambda q: clf.classify(q, escalate=False), queries)
    threshold = clf.fast_threshold
    clf.fast_threshold = 1.0  # every query on the slow path (a probability of exactly 1 never comes)
    emb_all, _ = _timed(clf.classify, queries)
    # Long queries (a question with its context): 30 English cases in one, past MiniLM's cut.
    english = [q for q in queries if q.isascii()]
    long_queries = [". ".join(english[i:i + 30]) for i in range(0, max(len(english) - 30, 1), 7)][:40]
    emb_long, _ = _timed(clf.classify, long_queries)
    clf.fast_threshold = threshold
    fast, early, emb = by_path["fast"] or [0.0], by_path["early"] or [0.0], by_path["embedding"] or [0.0]
    return {"routes": len(routes), "examples": sum(map(len, routes.values())), "queries": len(queries),
            "paths": {p: len(ts) for p, ts in by_path.items()},
            "fast_p50_ms": round(statistics.median(fast), 3), "fast_p99_ms": _p(fast, 0.99),
            "embedding_precision": settings.embedding_precision,
            "embedding_p50_ms": round(statistics.median(emb), 3), "embedding_p99_ms": _p(emb, 0.99),
            "early_layers": settings.early_exit_layers,
            "early_p50_ms": round(statistics.median(early), 3), "early_p99_ms": _p(early, 0.99),
            "fast_all_p99_ms": _p(fast_all, 0.99), "embedding_all_p99_ms": _p(emb_all, 0.99),
            "long_queries": len(long_queries), "long_query_words": round(statistics.mean(
                len(q.split()) for q in long_queries), 1) if long_queries else 0,
            "embedding_long_p50_ms": round(statistics.median(emb_long), 3) if emb_long else 0.0,
            "embedding_long_p99_ms": _p(emb_long, 0.99) if emb_long else 0.0,
            "embedding_max_tokens": settings.embedding_max_tokens,
            "fit_fast_s": round(fit_fast, 3), "fit_embedding_s": round(fit_emb, 3),
            "fast_threshold": round(clf.fast_threshold, 4), "embedding_threshold": clf.embedding_threshold,
            "calibration": clf.calibration}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench analyse", description=__doc__)
    p.add_argument("--routes", type=int, default=20)
    p.add_argument("--per-route", type=int, default=50)
    p.add_argument("--queries", type=int, default=400)
    p.add_argument("--precision", choices=("int8", "fp32"), default="int8", help="MiniLM's weights")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="routing.intents.embedding_max_tokens (default: the setting's default)")
    p.add_argument("--early-layers", type=int, default=None,
                   help="routing.intents.early_exit_layers (default: the setting's default; 0: no early exit)")
    args = p.parse_args(argv)
    figures = analysis_figures(args.routes, args.per_route, args.queries, args.precision, args.max_tokens,
                               args.early_layers)
    figures.update(matrix_figures())
    print(json.dumps(figures))
    return 0
