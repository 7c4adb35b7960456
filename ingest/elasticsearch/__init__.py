"""The Elasticsearch backend: one data stream per record kind, the same query API as DuckDB.

- :mod:`~ingest.elasticsearch.store`: :class:`ElasticsearchStore`, the pipeline's sink and the
  query API over one client.
- :mod:`~ingest.elasticsearch.sink`: bulk ``create`` by id (re-delivery is a duplicate, not a
  second copy); items refused for what they hold returned for quarantine, any other refusal retried.
- :mod:`~ingest.elasticsearch.reader`: the query API (``bool.filter``, ``search_after``,
  aggregations).
- :mod:`~ingest.elasticsearch.analytics`: the analytics reads (constraint binding counts,
  misroutes).
- :mod:`~ingest.elasticsearch.experiments`: the experiment reads (each side of a comparison from
  aggregations).
- :mod:`~ingest.elasticsearch.index_templates`: the index templates, their mappings derived from
  the storage schema; ``traces_template.json`` beside it holds the settings they share.
"""
