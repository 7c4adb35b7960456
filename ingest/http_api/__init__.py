"""The store over HTTP, both ends.

- :mod:`~ingest.http_api.routes`: :class:`IngestApi`, every route of the store's HTTP API (the
  intake, one trace by id, search, analytics, probes, events, snapshots, quarantine), mounted on
  the serving process's aiohttp application; their query models in :mod:`~ingest.http_api.params`, and
  :mod:`~ingest.http_api.answers` for the errors (OpenAI's shape), JSON and the parser's limits they share
  with the relay route (:mod:`~ingest.http_api.relay`) and the gateway's proxy (:mod:`~ingest.http_api.proxy`).
- :mod:`~ingest.http_api.experiment_routes`: the experiment read routes (two arms, versions or
  policies compared, grouped, and over time), mounted by :class:`IngestApi`.
- :mod:`~ingest.http_api.openapi`: the routes as the store's OpenAPI description reads them.
- :mod:`~ingest.http_api.client`: :class:`HttpTraceStore`, the :class:`~ingest.trace_store.TraceStore`
  that reads through those routes, for processes that cannot open the store themselves.
"""
