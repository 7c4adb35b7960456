"""The Elasticsearch backend: one data stream per record kind, the same query API as DuckDB.

- :mod:`~ingest.elasticsearch.store`: :class:`ElasticsearchStore`, the pipeline's sink and the
  query API over one client.
- :mod:`~ingest.elasticsearch.sink`: bulk ``create`` by id (re-delivery is a duplicate, not a
  second copy); items refused for what they hold returned for quarantine, any other refusal retried.
- :mod:`~ingest.elasticsearch.late_context`: the sink's upkeep giving a verdict stored before its
  trace the trace's context once it is stored.
- :mod:`~ingest.elasticsearch.reader`: the query API (``bool.filter``, ``search_after``,
  aggregations).
- :mod:`~ingest.elasticsearch.filters`: a ``TraceFilter`` as queries on traces and on the trace
  context feedback carries.
- :mod:`~ingest.elasticsearch.analytics`: the analytics reads (constraint binding counts,
  misroutes) and feedback joined to its traces where the context does not answer.
- :mod:`~ingest.elasticsearch.experiments`: the experiment reads (each side of a comparison from
  aggregations).
- :mod:`~ingest.elasticsearch.index_templates`: the index templates, their mappings derived from
  the storage schema; ``traces_template.json`` beside it holds the settings they share.
"""
