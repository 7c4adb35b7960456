"""The DuckDB backend: one file, written and read by one process.

- :mod:`~ingest.duckdb.store`: :class:`DuckDBTraceStore`, the pipeline's sink and the query API
  over one connection (read-only for a copied file).
- :mod:`~ingest.duckdb.sink`: one Arrow insert per kind, one transaction per batch, duplicates
  ignored by id, retention by age.
- :mod:`~ingest.duckdb.reader`: the query API, from the named queries in ``sql/queries.sql``.
- :mod:`~ingest.duckdb.file_layout`: reads of a file from before columns existed (opened read-only,
  not migrated): a missing column or field reads as NULL or its default.
- :mod:`~ingest.duckdb.schema`: tables created and migrated from the derived Arrow schemas; the
  DDL and queries are the ``sql/*.sql`` files beside it.
"""
