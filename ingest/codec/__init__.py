"""How a record is written down, on the way in and on the way out; no I/O here.

- :mod:`~ingest.codec.encoder`: a model to the JSON bytes a spool frame holds (orjson, the hot
  path of ``emit()``); candidate states become snapshot records referenced by content hash.
- :mod:`~ingest.codec.storage_schema`: the Arrow schema of each stored kind, derived from the
  models (DuckDB tables and Elasticsearch mappings are both derived from it).
- :mod:`~ingest.codec.to_arrow`: a batch of those JSON records to one Arrow table per kind, with
  the records Arrow cannot hold refused one by one.
- :mod:`~ingest.codec.fast_decoder`: its fast path, the C decoder ``_ndjson_arrow.c`` (built by
  ``setup.py``; Arrow's JSON reader does the work where it is missing).
- :mod:`~ingest.codec.contract`: a model's contract checked on those Arrow columns (the store's
  check of the gateway's unvalidated traces, :mod:`~ingest.codec.unchecked`), not on Python objects.
- :mod:`~ingest.codec.stored_rows`: rows read back from either backend to models again.
"""
