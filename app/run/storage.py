"""Where a serving process's records go: the store it opens, its spool and quarantine folders.

Shared by every process ``routelens serve`` runs (the gateway, ``routelens store``, the prober
and ``routelens ingest``), so it sits below all of them: nothing here knows who calls it.
:data:`RELAY_TOKEN_ENV` names the token with which one ``serve``'s processes relay records to
the one that owns the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ingest import DuckDBTraceStore, Quarantine
from schemas.config.storage import StorageSettings
from schemas.units import format_bytes

if TYPE_CHECKING:
    from ingest import ElasticsearchStore, TraceEmitter

__all__ = ["RELAY_TOKEN_ENV", "open_store", "pipeline_paths", "quarantine_in", "say_backlog", "say_store",
           "worker_paths"]

RELAY_TOKEN_ENV = "ROUTELENS_RELAY_TOKEN"


def pipeline_paths(st: StorageSettings, db_path: str) -> tuple[Path, Path]:
    """Return the spool and quarantine folders for a store (defaults sit next to the data)."""
    base = Path(db_path) if st.backend == "duckdb" else Path(st.duckdb_path).parent / "elasticsearch"
    spool = Path(st.spool.dir) if st.spool.dir else base.with_name(base.name + ".spool")
    quarantine = Path(st.quarantine_dir) if st.quarantine_dir else base.with_name(base.name + ".quarantine")
    return spool, quarantine


def worker_paths(st: StorageSettings, db_path: str, worker: int) -> tuple[Path, Path]:
    """Return a gateway worker's own spool and quarantine folders (beside the store's)."""
    spool, quarantine = pipeline_paths(st, db_path)
    return (spool.with_name(f"{spool.name}.gateway-{worker}"),
            quarantine.with_name(f"{quarantine.name}.gateway-{worker}"))


def quarantine_in(st: StorageSettings, folder: Path) -> Quarantine:
    """A process's quarantine files in ``folder``, kept as long as the store keeps its records.

    ``storage.retention_days`` with DuckDB, the data streams' ``retention_days`` with Elasticsearch.
    """
    days = st.elasticsearch.retention_days if st.backend == "elasticsearch" else st.retention_days
    return Quarantine(folder, keep_days=days)


def open_store(st: StorageSettings, db_path: str, *, lazy: bool = True) -> DuckDBTraceStore | ElasticsearchStore:
    """Open the configured backend for writing.

    Args:
        st: The storage settings (backend, retention, Elasticsearch connection).
        db_path: The DuckDB file (used when the backend is DuckDB).
        lazy: A DuckDB file another process writes is retried on first use (the server); False
            refuses it at once (``SinkUnavailable``; one-off commands).
    """
    if st.backend == "elasticsearch":
        from ingest import ElasticsearchStore

        return ElasticsearchStore.from_settings(st.elasticsearch)
    return DuckDBTraceStore(db_path, lazy=lazy, retention_days=st.retention_days, memory_limit=st.duckdb_memory_limit)


def say_backlog(emitter: TraceEmitter, spool_dir: Path) -> None:
    """Say at start that the spool holds records from before it (a crash, a store that was down): they go first."""
    if held := emitter.backlog_size():
        print(f"{spool_dir}: {held} records from before this start, delivered first", flush=True)


def say_store(st: StorageSettings, db_path: str) -> None:
    """Say at start where traces are kept, how much the file holds, and for how long (the default: for ever)."""
    if st.backend == "elasticsearch":
        es = st.elasticsearch
        print(f"trace store: Elasticsearch at {es.url} (data streams {es.prefix}-*), traces kept "
              f"{es.retention_days} days (storage.elasticsearch.retention_days)", flush=True)
        return
    path = Path(db_path)
    wal = path.with_name(path.name + ".wal")
    size = format_bytes(path.stat().st_size) if path.exists() else "new"
    if wal.exists() and wal.stat().st_size:
        size += f", {format_bytes(wal.stat().st_size)} of write-ahead log"
    kept = ("kept for ever: set storage.retention_days" if st.retention_days is None else
            f"kept {st.retention_days} days (storage.retention_days; the file does not shrink)")
    print(f"trace store: {path.resolve()} ({size}), traces {kept}", flush=True)

