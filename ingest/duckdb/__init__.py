"""The DuckDB backend: one file, written and read by one process.

- :mod:`~ingest.duckdb.store`: :class:`DuckDBTraceStore`, the pipeline's sink and the query API
  over one connection (read-only for a copied file).
- :mod:`~ingest.duckdb.sink`: one Arrow insert per kind, one transaction per batch, duplicates
  ignored by id, retention by age.
- :mod:`~ingest.duckdb.conflicts`: a trace whose id is stored already: counted a duplicate when it
  is the same trace, quarantined with its reason when it is a different one.
- :mod:`~ingest.duckdb.derived`: the columns derived at write time (``traces.constraint_hits``,
  ``rid_hash``).
- :mod:`~ingest.duckdb.rollup`: the per-minute traffic rollup (``traffic_minutes``) the overview
  and topology read instead of scanning the day.
- :mod:`~ingest.duckdb.reader`: the query API, from the named queries in ``sql/queries.sql``;
  :mod:`~ingest.duckdb.predicates` holds the SQL pieces every read shares (the named queries, a
  filter's WHERE clause).
- :mod:`~ingest.duckdb.analytics`: the analytics reads (constraint binding counts, misroutes).
- :mod:`~ingest.duckdb.experiments`: the experiment reads (each side of a comparison as an
  ``ArmStats``, and over time).
- :mod:`~ingest.duckdb.latches`: latch out-intervals of a window, from the stored snapshots.
- :mod:`~ingest.duckdb.file_layout`: reads of a file from before columns existed (opened read-only,
  not migrated): a missing column or field reads as NULL or its default.
- :mod:`~ingest.duckdb.schema`: tables created and migrated from the derived Arrow schemas; the
  DDL and queries are the ``sql/*.sql`` files beside it. :mod:`~ingest.duckdb.migrate` compares a
  table with its schema column by column; :mod:`~ingest.duckdb.upgrades` bridges older layouts.
"""
