"""``routelens intents eval|add``: measure the semantic-intent classifier; add examples to a route.

``eval --routes ROUTES.yaml --cases CASES.jsonl`` classifies each case (``{"text": ..., "expected":
ROUTE or null}``, both keys and no other; null, written out: out of scope, should abstain) on the
path the router takes (fast, then the embedding path when unsure unless ``--no-escalate``) and
prints a table or, with ``--json``, one JSON line last: ``{"n", "accuracy", "abstain_recall",
"false_abstain", "p50_ms", "p99_ms", "per_route", "paths", "paths_p99_ms", "calibration",
"warnings", ...}``. A case whose ``expected`` names no route
of ROUTES is refused (a typo would count as a miss; write null for out of scope); ``warnings`` lists
what the routes file holds that contradicts itself (an utterance under two routes), also on stderr.
accuracy: share of cases with an expected route that got it; abstain_recall: share of null cases
that abstained; false_abstain: share of cases with an expected route that abstained; calibration:
the thresholds and held-out figures the classifier fitted from the routes file alone (also stored
with the gateway's policy; docs/policies.md explains each). ``--method centroids``
measures the seed's method (nearest K-means centroid on MiniLM) on the same cases. The classifier
runs with the ``routing.intents`` settings of ``--config`` (precision, token cut, early exit,
thresholds, calibration) when that file has them, its routes replaced by ``--routes``; otherwise
with the defaults. The report's ``settings`` says which.

``add ROUTE FILE [--routes ROUTES.yaml] [--create]`` appends FILE's utterances (one a line) to ROUTE,
creating it if new, and refreshes the centroid cache beside the routes file: only ROUTE is
re-clustered. A routes file that is not there is refused (a typo would start a new file) unless
``--create`` asks for a new one. The file is rewritten: its leading comment lines are kept, any
other comment is dropped. An utterance already under another route is refused; a route left with
fewer than two examples is written, but the classifier refuses the file until it has two (no refit then).
Exit codes: 0 done, 2 bad input (a missing file, a file not UTF-8, a bad JSON line, a case line
without ``expected`` or with another key, a FILE without utterances, an invalid routes file).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from app.cli._common import BadInput, config_of, err, help_text, positive_int, stdout_console
from app.cli.intents_cases import _numbered_cases, _read_lines, read_cases

if TYPE_CHECKING:
    from collections.abc import Callable

    from schemas.config.intents import IntentSettings

__all__ = ["read_cases", "register", "run_eval"]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message not in self.messages:
            self.messages.append(message)


@contextmanager
def _routes_warnings() -> Iterator[list[str]]:
    """The warnings the routes file's loader logs meanwhile (an utterance under two routes), each once."""
    logger = logging.getLogger("router_core.intents.routes")
    handler = _Collect()
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


def _warn(messages: list[str]) -> None:
    for m in messages:
        err.print(f"[yellow]warning:[/yellow] {escape(m)}", soft_wrap=True)


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _classifier(routes: str, method: str, escalate: bool, max_tokens: int | None,
                configured: IntentSettings | None, check: Callable[[dict[str, list[str]]], None],
                ) -> tuple[Any, dict[str, Any]]:
    """The classifier ``method`` names, fitted, and what the report says of it.

    ``configured``: the configuration's intent settings (None: the defaults); ``routes`` replaces theirs.
    ``check(routes)`` runs before the fit (it refuses cases that name no route).
    """
    from router_core import IntentClassifier
    from schemas.config.intents import IntentSettings

    own = configured if configured is not None else IntentSettings(routes=routes)
    settings = own.model_copy(update={"routes": routes, "max_tokens": own.max_tokens if max_tokens is None
                                      else max_tokens, "escalate": own.escalate and escalate and method != "fast"})
    clf = IntentClassifier.from_settings(settings)
    check(clf.routes)
    if method == "centroids":
        from router_core import CentroidBaseline, MiniLMEncoder

        if clf.embedding_status is not None:
            raise BadInput(f"--method centroids needs the embedding model ({clf.embedding_status})")
        base = CentroidBaseline(clf.routes, settings, MiniLMEncoder(settings.embedding_precision,
                                                                     max_seq_length=settings.embedding_max_tokens))
        return base, {"method": method, "embedding_threshold": round(base.threshold, 4), "embedding": "on"}
    if settings.escalate:
        clf.fit_embedding()  # the router fits at startup; keep it out of the per-case times
    return clf, {"method": method, "fast_threshold": round(clf.fast_threshold, 4),
                 "embedding_threshold": None if clf.embedding_threshold is None else round(clf.embedding_threshold, 4),
                 "embedding": clf.embedding_status or ("on" if settings.escalate else "off"),
                 "calibration": clf.calibration}


def run_eval(routes: str, cases_path: str, *, escalate: bool = True, max_tokens: int | None = None,
             method: str = "joint", settings: IntentSettings | None = None) -> dict[str, Any]:
    """Fit on ``routes``, classify every case, return the report (the command without its output).

    ``method``: ``joint`` (the router's classifier), ``fast`` (its fast path alone) or ``centroids``
    (the seed's nearest K-means centroid on MiniLM, the baseline). ``settings``: the intent settings
    to run with, routes aside (None: the defaults); ``max_tokens`` None keeps theirs.
    """
    numbered = _numbered_cases(cases_path)
    cases = [(text, expected) for _, text, expected in numbered]

    def check(known: dict[str, list[str]]) -> None:
        for no, _, expected in numbered:
            if expected is not None and expected not in known:
                raise BadInput(f"{cases_path}:{no}: 'expected' names no route of {routes}: {expected!r} (routes: "
                               f"{', '.join(known)}; null for a case that should abstain)")

    t0 = time.perf_counter()
    with _routes_warnings() as warnings:
        clf, about = _classifier(routes, method, escalate, max_tokens, settings, check)
    fit_s = time.perf_counter() - t0
    times: list[float] = []
    by_path: dict[str, list[float]] = {}
    per_route: dict[str, dict[str, int]] = {}
    ok = abstain_in = abstain_oos = n_in = n_oos = 0
    for text, expected in cases:
        s = time.perf_counter()
        v = clf.classify(text)
        ms = (time.perf_counter() - s) * 1e3
        times.append(ms)
        by_path.setdefault(v.path, []).append(ms)
        if expected is None:
            n_oos += 1
            abstain_oos += v.abstained
            continue
        n_in += 1
        ok += v.label == expected
        abstain_in += v.abstained
        row = per_route.setdefault(expected, {"n": 0, "correct": 0, "abstained": 0})
        row["n"] += 1
        row["correct"] += v.label == expected
        row["abstained"] += v.abstained
    answered = n_in - abstain_in
    return {"n": len(cases), "accuracy": round(ok / n_in, 4) if n_in else None,
            "abstain_recall": round(abstain_oos / n_oos, 4) if n_oos else None,
            "false_abstain": round(abstain_in / n_in, 4) if n_in else None,
            "answered_accuracy": round(ok / answered, 4) if answered else None,
            "p50_ms": round(statistics.median(times), 3), "p99_ms": round(_quantile(times, 0.99), 3),
            "paths": {p: len(ts) for p, ts in by_path.items()},
            "paths_p99_ms": {p: round(_quantile(ts, 0.99), 3) for p, ts in by_path.items()},
            **about, "fit_s": round(fit_s, 2), "warnings": warnings,
            "per_route": {r: {**c, "accuracy": round(c["correct"] / c["n"], 4)} for r, c in sorted(per_route.items())}}


def _print_table(report: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title="intent eval per route", title_justify="left")
    for col in ("route", "n", "accuracy", "abstained"):
        t.add_column(col, justify="left" if col == "route" else "right")
    for route, row in report["per_route"].items():
        t.add_row(route, str(row["n"]), f"{row['accuracy']:.1%}", str(row["abstained"]))
    console = stdout_console()
    console.print(t)
    pct = {k: "-" if report[k] is None else f"{report[k]:.1%}" for k in ("accuracy", "abstain_recall", "false_abstain")}
    console.print(f"cases {report['n']}: accuracy {pct['accuracy']}, abstain recall {pct['abstain_recall']}, "
                  f"false abstain {pct['false_abstain']}; p50 {report['p50_ms']} ms, p99 {report['p99_ms']} ms; "
                  f"paths {report['paths']} (p99 ms {report['paths_p99_ms']}); method {report['method']}, "
                  f"embedding: {report.get('embedding', 'on')}; settings: {report.get('settings', 'defaults')}")
    if report.get("calibration"):
        console.print("calibration (held-out folds of the routes' examples): "
                      + ", ".join(f"{k} {v}" for k, v in report["calibration"].items()))


def _eval(args: argparse.Namespace) -> int:
    # BadInput (a cases file) and ConfigError (the routes or the configuration) are main's: one line, exit 2
    settings = config_of(args).routing.intents if Path(args.config).is_file() else None
    report = run_eval(args.routes, args.cases, escalate=not args.no_escalate, max_tokens=args.max_tokens,
                      method=args.method, settings=settings)
    report["settings"] = "defaults" if settings is None else f"{args.config}: routing.intents"
    _warn(report["warnings"])
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        _print_table(report)
    return 0


def _add(args: argparse.Namespace) -> int:
    from router_core import IntentClassifier, append_examples, embedder_missing
    from schemas.config.intents import IntentSettings

    if not args.route.strip():
        raise BadInput(f"ROUTE {args.route!r}: a route name must be a non-empty string")
    # A ConfigError (the configuration, the routes file) is main's: one line, exit 2.
    # The configuration's routes and settings (the refit then fills the cache the gateway reads), unless
    # --routes names a file; without a configuration, --routes and the default settings. (A path taken
    # from nowhere, as the shipped routes' data/intents/... once was, would create a one-route file under
    # whatever folder the command ran in.)
    settings = config_of(args).routing.intents if Path(args.config).is_file() else None
    if args.routes is not None:
        path = args.routes
    elif settings is not None:
        path = settings.routes
    else:
        raise BadInput(f"no routes file to add to: name one with --routes FILE, or give --config (no {args.config} "
                       "here) to add to its routing.intents.routes")
    settings = (IntentSettings(routes=path) if settings is None
                else settings.model_copy(update={"routes": path}))
    utterances = _read_lines(args.file)  # FILE is read whole before any write
    if not any(u.strip() for u in utterances):
        raise BadInput(f"{args.file}: no utterances (one a line)")
    if not Path(path).exists() and not args.create:  # a typo of R would start a new routes file beside it
        raise BadInput(f"{path}: no such routes file (--create starts a new one)")
    with _routes_warnings() as warnings:  # the refit's load says them again: they are collected once
        routes = append_examples(path, args.route, utterances)
        _warn(warnings)
        n = len(routes[args.route])
        err.print(f"{args.route}: {n} example{'s' if n != 1 else ''} in {path}")
        short = [r for r, ts in routes.items() if len(ts) < 2]
        if short:
            err.print(f"not refitted: {', '.join(short)} ha{'s' if len(short) == 1 else 've'} fewer than 2 "
                      "examples; the classifier refuses the file until each route has 2", soft_wrap=True)
            return 0
        if len(routes) >= 2 and embedder_missing() is None and settings.escalate:
            clf = IntentClassifier.from_settings(settings)
            clf.fit_embedding()
            err.print(f"re-clustered: {', '.join(clf.reclustered) or 'none'}")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``intents eval`` and ``intents add``."""
    p = sub.add_parser("intents", parents=[common], help="semantic intents: evaluate, add examples",
                       description=help_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    isub = p.add_subparsers(dest="intents_command", required=True)
    e = isub.add_parser("eval", parents=[common], help="accuracy, abstention and latency on labelled cases")
    e.add_argument("--routes", required=True, help="routes YAML (route -> example utterances)")
    e.add_argument("--cases", required=True, help="JSONL: {\"text\": ..., \"expected\": ROUTE or null}")
    e.add_argument("--no-escalate", action="store_true", help="fast path only (as --method fast)")
    e.add_argument("--method", choices=("joint", "fast", "centroids"), default="joint",
                   help="joint: the router's classifier (default); fast: its fast path alone; centroids: the seed's "
                        "nearest K-means centroid on MiniLM (the baseline)")
    e.add_argument("--max-tokens", type=positive_int, default=None,
                   help="cut input here, at least 1 (default: the configuration's routing.intents.max_tokens, "
                        "else 512)")
    e.add_argument("--json", action="store_true", help="print the report as JSON (one line, last)")
    e.set_defaults(func=_eval)
    a = isub.add_parser("add", parents=[common], help="append utterances (one a line) to a route",
                        description="Append FILE's utterances (one a line) to ROUTE, creating it if new, and refit. "
                                    "The routes file is rewritten: its leading comment lines are kept, any other "
                                    "comment is dropped. A routes file that is not there is refused (a typo would "
                                    "start a new one) unless --create is given.")
    a.add_argument("route", metavar="ROUTE")
    a.add_argument("file", metavar="FILE")
    a.add_argument("--routes", default=None,
                   help="routes YAML (default: --config's routing.intents.routes)")
    a.add_argument("--create", action="store_true",
                   help="start the routes file when it is not there (without it, a missing one is refused)")
    a.set_defaults(func=_add)
