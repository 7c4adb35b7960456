"""The store over HTTP, both ends.

- :mod:`~ingest.http_api.routes`: :class:`IngestApi`, every route of the store's HTTP API (the
  intake, one trace by id, search, analytics, probes, events, snapshots, quarantine), mounted on
  the serving process's aiohttp application.
- :mod:`~ingest.http_api.client`: :class:`HttpTraceStore`, the :class:`~ingest.trace_store.TraceStore`
  that reads through those routes, for processes that cannot open the store themselves.
"""
