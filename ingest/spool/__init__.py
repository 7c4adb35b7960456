"""The durable spool: the write-ahead queue on disk between ``emit()`` and the sinks.

- :mod:`~ingest.spool.durable_spool`: :class:`DurableSpool`, segments in one folder, appended in
  order, read back by the batcher, forgotten on acknowledgement, replayed after a restart.
- :mod:`~ingest.spool.folder`: the files beside the frames: the acknowledgement, the segments
  found at start-up, the spares kept to be written again.
- :mod:`~ingest.spool.segment`: one memory-mapped segment file and its frame layout (length,
  checksum, sequence number, kind, payload).
- :mod:`~ingest.spool.mirror`: the newest frames kept in memory too, so that a batcher that keeps
  up never copies them back out of the mapping.
"""
