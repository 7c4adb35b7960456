"""Traces that come from outside the process, checked one record at a time before they are emitted.

- :mod:`~ingest.intake.lines`: NDJSON or a JSON array split into records, each validated on its
  own (size, JSON, mapping, the model) with a verdict per line; the bad ones are quarantined.
  ``POST /v1/traces`` (:mod:`ingest.http_api.routes`) takes its bodies through it.
- :mod:`~ingest.intake.file_import`: a JSONL or Parquet file through the same checks
  (``routelens ingest import``), with a report of what happened to every line; other formats
  (CSV) are refused whole.
- :mod:`~ingest.intake.field_mapping`: other routers' log lines mapped to :class:`DecisionTrace`
  fields (``generic``, or a custom mapping).
- :mod:`~ingest.intake.store_range`: numbers a valid trace may carry that no store holds (an
  integer beyond 64 bits, ``inf``, ``nan``), refused on their line.
- :mod:`~ingest.intake.non_finite`: a record the JSON parser refused for ``NaN``, ``Infinity`` or a
  number beyond a double (``1e400``), refused naming the field that holds it.
"""
