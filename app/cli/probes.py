"""``routelens probes calibrate`` and ``routelens probes run``.

- ``probes calibrate --url URL [--url URL2 ...] [--samples N] [--drifted-url URL ...]`` runs N
  semantic rounds against each healthy (and drifted) instance and prints, per reference, the
  healthy and drifted similarity distributions and the suggested threshold
  (:func:`probes.references.calibrate`); ``--write FILE`` writes a references file with those
  thresholds, ``--json`` prints the table as JSON. Needs the embedding model (exit 2 without).
- ``probes run [--host H] [--port P]``: the standalone prober (``app.run.probe_service.run``).
- ``probes baselines [--forget INSTANCE ...] [--forget-all] [--json]``: the latency baselines the
  prober learned (``probes.latency.state_path``, else beside the trace file), and dropping one
  learned in a bad hour (during a fault, or before a planned change made a new normal): a running
  prober notices the file changed and learns it again from the instance's next healthy probes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
from pathlib import Path

import aiohttp
from rich import box
from rich.markup import escape
from rich.table import Table

from app.cli._common import BadInput, config_of, err, fail, log_settings_of, port, stdout_console
from app.cli.probe import api_key_of, base_url, first_model, probe_settings
from app.run.logs import add_log_arguments
from probes.references import Calibration, calibrate, dump_references, load_references
from probes.types import Target

__all__ = ["register"]


async def _sample(args: argparse.Namespace, urls: list[str]) -> dict[str, list[float]]:
    from probes.semantic import SemanticCheck

    settings = probe_settings(args)
    refs = load_references(args.references or settings.semantic.references)
    check = SemanticCheck(settings, args.embedder, refs)
    api_key = api_key_of(args)
    out: dict[str, list[float]] = {ref.id: [] for ref in refs}
    async with aiohttp.ClientSession() as session:
        for url in urls:
            model = args.model or await first_model(session, url, settings.timeout_s, api_key)
            target = Target(instance=url, model=model, url=url.rstrip("/"), api_key=api_key)
            for _ in range(args.samples):
                sims, failed, _ms = await check.similarities(session, target)
                if failed is not None:
                    raise ValueError(f"{url}: {failed.reason}")
                for ref_id, sim in sims.items():
                    out[ref_id].append(sim)
    return out


def _table(rows: list[Calibration]) -> Table:
    """The key figures, the suggested threshold first: readable at 80 columns (every figure is in ``--json``)."""
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("reference", overflow="fold")
    for name in ("suggested", "separation", "healthy\nmin", "drifted\nmax", "healthy\nmean±std"):
        t.add_column(name, justify="right", no_wrap=True)

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    for c in rows:
        t.add_row(c.reference, f(c.suggested), f(c.separation), f(c.healthy_min), f(c.drifted_max),
                  f"{c.healthy_mean:.3f}±{c.healthy_std:.3f}")
    return t


def _counts(rows: list[Calibration]) -> str:
    healthy = sorted({c.healthy_n for c in rows})
    drifted = sorted({c.drifted_n for c in rows})
    return (f"samples per reference: healthy {'/'.join(map(str, healthy)) or '0'}, drifted "
            f"{'/'.join(map(str, drifted)) or '0'}; p1, p99 and every figure: --json")


def _check_write(dest: str) -> str | None:
    """Why ``--write DEST`` cannot be written (checked before the work), or None."""
    path = Path(dest)
    if path.is_dir():
        return f"--write {dest}: is a directory"
    folder = path.parent
    if not folder.is_dir():
        return f"--write {dest}: no such directory: {folder}"
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"--write {dest}: cannot write there (permission denied)"
    return None


def _calibrate(args: argparse.Namespace) -> int:
    from probes.embedder import MiniLMEmbedder, available

    if args.samples < 1:
        fail(f"--samples must be at least 1, not {args.samples}")
        return 2
    problem = _check_write(args.write) if args.write else None
    try:
        api_key_of(args)
        args.url = [base_url(u, "--url") for u in args.url]
        args.drifted_url = [base_url(u, "--drifted-url") for u in args.drifted_url]
    except ValueError as exc:  # BadInput is one
        problem = problem or str(exc)
    if problem:
        fail(problem)
        return 2
    missing = available()
    if missing is not None:
        fail(f"calibration needs the embedding model: {missing}")
        return 2
    args.embedder = MiniLMEmbedder()
    try:
        healthy = asyncio.run(_sample(args, args.url))
        drifted = asyncio.run(_sample(args, args.drifted_url)) if args.drifted_url else None
    except ValueError as exc:
        fail(f"{exc}")
        return 2
    rows = calibrate(healthy, drifted)
    if args.json:
        print(json.dumps([dataclasses.asdict(c) for c in rows]))
    else:
        console = stdout_console(highlight=False)
        console.print(_table(rows))
        console.print(_counts(rows))
    if args.write:
        refs = load_references(args.references or probe_settings(args).semantic.references)
        suggested = {c.reference: c.suggested for c in rows}
        refs = [r.model_copy(update={"threshold": suggested.get(r.id, r.threshold)}) for r in refs]
        header = f"routelens probes calibrate: {args.samples} rounds per instance of {', '.join(args.url)}"
        try:
            Path(args.write).write_text(dump_references(refs, header), encoding="utf-8")
        except OSError as exc:  # checked before the work; a disk that filled since still gets one line
            fail(f"--write {args.write}: cannot write: {exc.strerror or exc}")
            return 2
        err.print(f"wrote {escape(args.write)}")
    return 0


def _baselines(args: argparse.Namespace) -> int:
    from app.run.prober import baselines_path
    from probes.baselines import BaselineStore

    config = config_of(args)
    path = baselines_path(config, args.db or config.storage.duckdb_path)
    store = BaselineStore(path)
    if store.load_error is not None:
        raise BadInput(store.load_error)
    known = store.all()
    if args.forget or args.forget_all:
        ids = sorted(known) if args.forget_all else list(dict.fromkeys(args.forget))
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise BadInput(f"no latency baseline for {', '.join(unknown)} in {path} "
                           f"(it has: {', '.join(sorted(known)) or 'none'})")
        for instance in ids:
            store.forget(instance)
        n = config.probes.latency.baseline_probes
        err.print(f"dropped the latency baseline of {escape(', '.join(ids)) or 'no instance'} in {escape(str(path))}: "
                  f"a running prober learns it again from the next {n} healthy probes of each "
                  "(probes.latency.baseline_probes) and judges its latency against that", soft_wrap=True)
        return 0
    if args.json:
        rows = {k: dataclasses.asdict(v) for k, v in sorted(known.items())}
        print(json.dumps({"path": str(path), "baselines": rows}))
        return 0
    if not known:
        err.print(f"no latency baseline learned yet in {escape(str(path))}")
        return 0
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=escape(str(path)), title_justify="left")
    for name, right in (("instance", False), ("p50 ms", True), ("p95 ms", True), ("probes", True),
                        ("learned at", False)):
        t.add_column(name, justify="right" if right else "left", overflow="fold")
    for instance, b in sorted(known.items()):
        t.add_row(escape(instance), f"{b.p50_ms:.1f}", f"{b.p95_ms:.1f}", str(b.samples), escape(b.learned_at or "-"))
    stdout_console().print(t)
    return 0


def _run(args: argparse.Namespace) -> int:
    from app.run.probe_service import run

    return int(run(args, log_settings_of(args)))


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``probes`` and its subcommands ``calibrate``, ``run`` and ``baselines``."""
    probes = sub.add_parser("probes", parents=[common],
                            help="the prober: calibrate references, run standalone, its latency baselines")
    cmds = probes.add_subparsers(dest="probes_command", required=True)
    c = cmds.add_parser("calibrate", parents=[common], help="suggest semantic thresholds from measured similarities")
    c.add_argument("--url", action="append", required=True, help="a healthy instance (repeatable)")
    c.add_argument("--drifted-url", action="append", default=[], help="a drifted instance (repeatable)")
    c.add_argument("--samples", type=int, default=10, metavar="N", help="rounds per instance (default: %(default)s)")
    c.add_argument("--model", help="model to ask for (default: the first of GET /v1/models)")
    c.add_argument("--references", metavar="FILE", help="references file (default: probes.semantic.references)")
    c.add_argument("--write", metavar="FILE", help="write the references with the suggested thresholds")
    c.add_argument("--json", action="store_true", help="print the calibration as JSON")
    c.add_argument("--timeout", type=float, metavar="S", help="per-request timeout (default: probes.timeout_s)")
    c.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the instances' API key")
    c.set_defaults(func=_calibrate)
    r = cmds.add_parser("run", parents=[common], help="probe the fleet standalone (verdicts over HTTP)")
    r.add_argument("--host", help="address of the prober's HTTP API")
    r.add_argument("--port", type=port, help="port of the prober's HTTP API (default: 8092; the store's is 8090)")
    r.add_argument("--store-url", help="relay results to this running store (e.g. `routelens store`) instead of "
                   "writing the configured backend directly")
    r.add_argument("--db", help="DuckDB trace file (default: storage.duckdb_path)")
    add_log_arguments(r)
    r.set_defaults(func=_run)
    b = cmds.add_parser("baselines", parents=[common], help="the latency baselines learned; drop one to learn it again")
    b.add_argument("--forget", action="append", default=[], metavar="INSTANCE",
                   help="drop this instance's baseline: the prober learns it again from its next probes (repeatable)")
    b.add_argument("--forget-all", action="store_true", help="drop every baseline")
    b.add_argument("--json", action="store_true", help="print the baselines as JSON")
    b.add_argument("--db", help="DuckDB trace file the baselines sit beside (default: storage.duckdb_path; "
                   "probes.latency.state_path wins)")
    b.set_defaults(func=_baselines)
