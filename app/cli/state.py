"""``routelens state parse-metrics FILE``: one ``/metrics`` scrape as the router normalises it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.cli._common import err


def _parse_metrics(args: argparse.Namespace) -> int:
    from router_core.metrics_parse import MetricsParseError, parse_engine_metrics

    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        err.print(f"[red]error:[/red] cannot read {args.file}: {exc}")
        return 2
    try:
        g = parse_engine_metrics(text)
    except MetricsParseError as exc:
        err.print(f"[red]error:[/red] {args.file}: {exc}")
        return 2
    print(json.dumps({"engine": g.engine, "queue": g.queue, "running": g.running,
                      "kv_cache_usage": g.kv_cache_usage, "warmup_progress": g.warmup_progress}))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``state`` and its subcommands."""
    state = sub.add_parser("state", parents=[common], help="inspect router state").add_subparsers(
        dest="state_command", required=True
    )
    p = state.add_parser("parse-metrics", parents=[common], help="normalise one /metrics scrape (vLLM, SGLang)")
    p.add_argument("file", help="a Prometheus text scrape, or - for standard input")
    p.set_defaults(func=_parse_metrics)
