"""``routelens ingest import FILE``: store a JSONL or Parquet file of traces (exit 0 only if all were)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from app.cli._common import err, fail
from app.config import load_config
from schemas.config.storage import StorageSettings


def _mapping(name: str) -> dict[str, list[str]] | None:
    """The named mapping, or the JSON file ``name`` checked field by field over ``generic``.

    Raises:
        ValueError: The file is not JSON, not an object, names an unknown target, or a source list is
            not a list of non-empty strings (the message names the key).
    """
    from ingest import GENERIC, MAPPINGS

    if name in MAPPINGS:
        return MAPPINGS[name]
    custom = json.loads(Path(name).read_text(encoding="utf-8"))
    if not isinstance(custom, dict):
        raise ValueError('must be a JSON object {"target.field": ["source", ...]}, '
                         f"not a {type(custom).__name__}")
    for key, sources in custom.items():
        if key not in GENERIC:
            raise ValueError(f"{key!r}: unknown target field (known: {', '.join(GENERIC)})")
        if not isinstance(sources, list) or not all(isinstance(s, str) and s for s in sources):
            raise ValueError(f"{key!r}: must be a list of source field names, e.g. [{json.dumps(key)}]")
    return {**GENERIC, **custom}


def _run(args: argparse.Namespace) -> int:
    from app.run.access import hash_key_of
    from app.run.storage import open_store, pipeline_paths, quarantine_in
    from ingest import SinkError, TraceEmitter, check_import_format, import_file

    src = Path(args.file)
    if not src.is_file():
        fail(f"no such file: {src}")
        return 2
    try:  # a format not imported is refused before the store is opened (or created)
        check_import_format(src)
    except ValueError as exc:
        fail(f"{exc}")
        return 2
    cfg = load_config(args.config) if Path(args.config).is_file() else None
    st = cfg.storage if cfg else StorageSettings()
    db = args.db or st.duckdb_path
    try:
        mapping = _mapping(args.mapping)
    except OSError as exc:
        fail(f"--mapping {args.mapping}: cannot read: {exc.strerror or exc}")
        return 2
    except ValueError as exc:  # json.JSONDecodeError too
        fail(f"--mapping {args.mapping}: {exc}")
        return 2
    try:  # the configured backend; a DuckDB file that another process writes is refused at once
        store = open_store(st, db, lazy=False)
    except SinkError as exc:
        fail(f"{exc}\n(a running server writes this file? POST the traces to /v1/traces)")
        return 2
    quarantine = quarantine_in(st, pipeline_paths(st, db)[1])
    emitter = TraceEmitter(store, st, quarantine=quarantine).start()
    hash_key = hash_key_of(cfg)
    columns = (TextColumn("importing {task.description}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn())
    try:
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(src.name, total=None)
            report = import_file(src, emitter, mapping=mapping, hash_key=hash_key,
                                 progress=lambda done, total: bar.update(task, completed=done, total=total))
    except ValueError as exc:  # UnreadableFile: a format not imported (CSV: nothing read), or a corrupt Parquet file
        # (what was taken before is still stored)
        emitter.close()
        fail(f"{exc}")
        return 2
    emitter.close()
    refused = f"  refused by the store {report.refused_by_store}" if report.refused_by_store else ""
    print(f"lines {report.lines}  accepted {report.accepted}  rejected {report.rejected}  "
          f"stored {report.stored}  already stored {report.duplicates}{refused}")
    if report.rejected or report.refused_by_store:
        err.print(f"{report.rejected + report.refused_by_store} refused lines are in the quarantine: "
                  f"{quarantine.folder}")
    return 0 if report.complete else 1


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``ingest import``."""
    p = sub.add_parser("ingest", parents=[common], help="bring traces from files into the store")
    actions = p.add_subparsers(dest="action", required=True)
    imp = actions.add_parser("import", parents=[common], help="import a JSONL or Parquet file of traces")
    imp.add_argument("file", help="a JSONL/NDJSON file (one JSON object per line) or a .parquet/.pq file; "
                                  "CSV is refused (convert it to Parquet first)")
    imp.add_argument("--db", help="DuckDB trace file (default: storage.duckdb_path); no server may be writing it")
    imp.add_argument("--mapping", default="routelens",
                     help="routelens (traces as they are), generic (other routers' logs, see "
                          "ingest/intake/field_mapping.py) or a JSON file of {field: [sources]}")
    imp.set_defaults(func=_run)
