"""The Elasticsearch backend: the pipeline's sink and the query API over the same client."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from elasticsearch import Elasticsearch
from pydantic import BaseModel

from ingest.codec.encoder import encode_batch
from ingest.elasticsearch.reader import ElasticsearchReader
from ingest.elasticsearch.sink import ElasticsearchSink
from ingest.record_sink import PreparedBatch, RecordBatch, WriteResult
from schemas.config.storage import ElasticsearchSettings
from schemas.errors import ConfigError

__all__ = ["ElasticsearchStore"]


class ElasticsearchStore(ElasticsearchReader):
    """Records in Elasticsearch data streams: :class:`RecordSink` and :class:`TraceStore`.

    Args:
        client: The official client.
        prefix: Data stream name prefix.
        retention_days: Lifecycle retention of the data streams.
        max_retries: Bulk retries of items answered 429.
        initial_backoff_s: First backoff of those retries (then doubled).
        refresh: The bulk ``refresh`` parameter (``wait_for``, ``true`` or ``false``).
    """

    def __init__(self, client: Elasticsearch, *, prefix: str = "routelens", retention_days: int = 30,
                 max_retries: int = 5, initial_backoff_s: float = 1.0, refresh: str = "wait_for") -> None:
        super().__init__(client, prefix)
        self.sink = ElasticsearchSink(client, prefix=prefix, retention_days=retention_days, max_retries=max_retries,
                                      initial_backoff_s=initial_backoff_s, refresh=refresh)

    @classmethod
    def from_settings(cls, es: ElasticsearchSettings, environ: Mapping[str, str] | None = None) -> ElasticsearchStore:
        """Build the client and the store from the ``storage.elasticsearch`` settings.

        Args:
            es: The settings.
            environ: Where ``api_key_env`` is looked up (default: ``os.environ``).

        Raises:
            ConfigError: ``api_key_env`` names a variable that is unset or empty (failing closed,
                at startup: never connecting without the key), or the client cannot use ``url``.
        """
        api_key = None
        if es.api_key_env is not None:
            api_key = (os.environ if environ is None else environ).get(es.api_key_env, "").strip()
            if not api_key:
                raise ConfigError("<environment>", [(None, "storage.elasticsearch.api_key_env",
                                                     f"names the environment variable {es.api_key_env}, "
                                                     "which is unset or empty")])
        try:
            client = Elasticsearch(es.url, api_key=api_key, request_timeout=es.request_timeout_s, max_retries=1)
        except ValueError as exc:  # what the pattern lets through (a port out of range, say)
            raise ConfigError("<configuration>", [(None, "storage.elasticsearch.url", str(exc))]) from exc
        return cls(client, prefix=es.prefix, retention_days=es.retention_days, max_retries=es.max_retries,
                   refresh=es.refresh)

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        """Decode a batch into documents."""
        return self.sink.prepare(batch)

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """Bulk-create a prepared batch (see :class:`ElasticsearchSink`)."""
        return self.sink.write(prepared)

    def idle(self) -> None:
        """Give the verdicts stored before their trace its context (:meth:`ElasticsearchSink.idle`)."""
        self.sink.idle()

    def write_records(self, records: Sequence[BaseModel]) -> WriteResult:
        """Store records directly, bypassing the pipeline (tools and tests)."""
        return self.write(self.prepare(encode_batch(records)))

    def close(self) -> None:
        """Close the client."""
        self.sink.close()
