"""The ``storage:`` section of ``routelens.yaml``: where traces go and how they get there.

Every record the router, the probes or the intake produce goes through one pipeline: a durable
spool on disk (the write-ahead queue), a background batcher, and one backend (DuckDB by default,
Elasticsearch to scale out). The defaults suit one machine; nothing here is required.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from schemas.common import ContractModel
from schemas.paths import OutputPath

__all__ = ["ElasticsearchSettings", "SpoolSettings", "StorageSettings"]


class SpoolSettings(ContractModel):
    """The durable spool: segment files with length and checksum framing."""

    dir: OutputPath | None = Field(None, description="Spool folder; default: '<duckdb_path>.spool'.")
    segment_bytes: int = Field(32 * 1024 * 1024, ge=64 * 1024, description="Size of one segment file.")
    max_bytes: int = Field(2 * 1024**3, ge=64 * 1024, description="Disk the spool may use at most.")
    fsync: Literal["never", "interval", "always"] = Field(
        "interval",
        description="'never': the OS writes back (survives a crash of the process, not of the machine); "
        "'interval': flushed every fsync_interval_ms; 'always': flushed in emit() (slow, blocking).",
    )
    fsync_interval_ms: int = Field(1000, ge=1)
    full_policy: Literal["block", "drop_oldest"] = Field(
        "block",
        description="When the spool is full or unwritable: 'block' makes emit() wait for room; "
        "'drop_oldest' discards the oldest undelivered records (counted as dropped, logged).",
    )
    max_record_bytes: int = Field(1024 * 1024, ge=1024, description="Larger records are quarantined.")


def _refresh_word(value: object) -> object:
    """YAML reads ``refresh: false`` as a boolean: the words Elasticsearch takes are meant."""
    return str(value).lower() if isinstance(value, bool) else value


class ElasticsearchSettings(ContractModel):
    """The Elasticsearch backend (data streams with a lifecycle in the index template)."""

    url: str = Field(
        "http://127.0.0.1:9200", pattern=r"^https?://[^\s/?#]+\S*$",
        description="The cluster: http:// or https://, a host, optionally :port and a path prefix.",
    )
    prefix: str = Field("routelens", pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Names start with this.")
    api_key_env: str | None = Field(
        None,
        description="Environment variable holding an API key (named but unset or empty: the store refuses to start).",
    )
    retention_days: int = Field(30, ge=1, description="Data stream lifecycle data_retention.")
    request_timeout_s: float = Field(10.0, gt=0)
    max_retries: int = Field(5, ge=0, description="Bulk retries of 429 answers (exponential backoff).")
    refresh: Annotated[Literal["false", "wait_for", "true"], BeforeValidator(_refresh_word)] = Field(
        "wait_for",
        description="Bulk refresh: 'wait_for' makes a stored trace searchable before the pipeline lets it go from "
        "its read-your-writes cache; 'true' forces a refresh (tests); 'false' is fastest (YAML's unquoted "
        "false and true are taken as these words).",
    )


class StorageSettings(ContractModel):
    """Where traces go, and the trace pipeline that gets them there."""

    backend: Literal["duckdb", "elasticsearch"] = "duckdb"
    duckdb_path: OutputPath = Field(
        ".routelens/traces.duckdb", description="The DuckDB trace file; relative to the config file."
    )
    separate_process: bool = Field(
        True,
        description="serve runs the trace store (its writer, and the query API behind the gateway's port) in a "
        "process of its own, started and ended with it: storing never holds the gateway's event loop "
        "(c=16 throughput +12-17% in docs/benchmarks.md). False keeps it in the gateway's process with one "
        "worker; more workers always relay to a store process.",
    )
    duckdb_memory_limit: str | None = Field(
        "1GB", pattern=r"^[0-9]+(\.[0-9]+)? ?([KMGT]i?B)$",
        description="DuckDB's memory_limit for the process that writes and serves the trace file (e.g. "
        "'512MB', '2GiB'): its cache of table blocks grows with the table up to it. Null: DuckDB's own "
        "default, 80% of RAM. Every page's queries at 10M traces ran as fast under 512MB (docs/benchmarks.md).",
    )
    queue_size: int = Field(
        50_000, ge=1,
        description="Records held in memory: the spool's read-ahead mirror, or all of them while the spool is down.",
    )
    pending_traces: int = Field(
        4096, ge=0,
        description="Traces emitted but not stored yet that a process keeps to answer reads of them at once "
        "(read-your-writes): the newest this many, and of a big fleet's fewer (8 candidates a trace on average at "
        "most). Each holds its decision (about 35 kB with four candidates, 0.4 MB with 200), and while the store "
        "is down nothing is stored: this bounds what a long outage holds.",
    )
    batch_size: int = Field(
        32_768, ge=1, description="Records per sink write at most; batches grow toward it under load (cheaper inserts)."
    )
    flush_interval_ms: int = Field(
        500, ge=1, description="Longest wait for a batch to fill before it is written (by serve's gateways: "
        "relayed to the store process).")
    store_flush_interval_ms: int = Field(
        2000, ge=1,
        description="The store process's longest wait for a batch to fill before DuckDB writes it. The relay "
        "answers once records are in the store's spool, so this sets only how often the store writes: each "
        "DuckDB insert has a fixed cost whatever its size (planning it, committing: milliseconds of CPU; "
        "docs/benchmarks.md). A trace looked up by request_id is written at once when it is still waiting.",
    )
    gil_switch_interval_ms: float | None = Field(
        1.0, gt=0,
        description="Python's thread switch interval while the pipeline runs (lowered, never raised; null: "
        "left alone). Between their C calls the pipeline's threads need the GIL for a moment; at Python's "
        "default of 5 ms each such moment waits behind the request threads while a core idles.",
    )
    detail_share: float = Field(
        1.0, ge=0, le=1, description="Share of traces stored with full candidate detail (the rest: summaries)."
    )
    retention_days: int | None = Field(
        None, ge=1,
        description="Delete DuckDB records, and quarantine files, older than this (checked hourly; null: kept "
        "for ever, and the file grows by about 3 kB a trace). The file does not shrink: DuckDB reuses the "
        "space of whole deleted row groups for new rows; see docs/deployment.md, Running for weeks, to compact it.")
    quarantine_dir: OutputPath | None = Field(
        None, description="Folder of quarantine files (one a UTC day; deleted with retention_days); default: "
        "next to the spool.")
    intake_token_env: str | None = Field(
        None, description="Environment variable with the bearer token POST /v1/traces requires (unset: open)."
    )
    read_token_env: str | None = Field(
        None,
        description="Environment variable with the bearer token the GET query routes require "
        "(unset: open, allowed only when the server binds a loopback address).",
    )
    intake_max_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Largest intake request body.")
    spool: SpoolSettings = SpoolSettings()
    elasticsearch: ElasticsearchSettings = ElasticsearchSettings()
