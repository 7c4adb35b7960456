"""``routelens state parse-metrics FILE``: one ``/metrics`` scrape as the router normalises it.

Prints one JSON object: the engine and its gauges, ``num_gpu_blocks`` and ``block_size`` when vLLM's
``cache_config_info`` is present, and ``adjustments`` when gauges out of range were refused or
clamped. Exits 2 with the reason (``decode``, ``parse``, ``no_gauges``, ``out_of_range``) when the
router would refuse the scrape.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.cli._common import fail


def _parse_metrics(args: argparse.Namespace) -> int:
    from router_core import MetricsParseError, parse_engine_metrics

    try:
        body = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        fail(f"cannot read {args.file}: {exc}")
        return 2
    try:
        g = parse_engine_metrics(body)
    except MetricsParseError as exc:
        fail(f"{args.file}: {exc.reason}: {exc}")
        return 2
    out: dict[str, object] = {"engine": g.engine, "queue": g.queue, "running": g.running,
                              "kv_cache_usage": g.kv_cache_usage, "warmup_progress": g.warmup_progress}
    if g.num_gpu_blocks is not None or g.block_size is not None:  # vllm:cache_config_info
        out.update(num_gpu_blocks=g.num_gpu_blocks, block_size=g.block_size)
    if g.adjustments:  # out-of-range gauges refused or clamped, as the router does
        out["adjustments"] = list(g.adjustments)
    print(json.dumps(out))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``state`` and its subcommands."""
    state = sub.add_parser("state", parents=[common], help="inspect router state").add_subparsers(
        dest="state_command", required=True
    )
    p = state.add_parser("parse-metrics", parents=[common],
                         help="normalise one /metrics scrape (vLLM, SGLang, TGI, llama.cpp)")
    p.add_argument("file", help="a Prometheus text scrape, or - for standard input")
    p.set_defaults(func=_parse_metrics)
