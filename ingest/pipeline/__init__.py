"""The trace pipeline: ``emit()`` on the request path, storage on background threads.

The life of one frame
---------------------
1. **emit** (caller's thread, :class:`~ingest.pipeline.emitter.TraceEmitter`): under
   ``Backlog.lock`` the record is
2. **encoded** (:mod:`ingest.codec.encoder`): JSON bytes, new candidate states first as snapshot
   records; one over ``max_record_bytes`` is quarantined instead;
3. **spooled** as a frame ``(seq, kind, payload)``: :meth:`~ingest.pipeline.backlog.Backlog.append`
   numbers it and copies it into the mapped spool segment (:mod:`ingest.spool`), or holds it in
   memory while the spool is unusable; a full spool blocks or drops the oldest (the policy). A
   trace (or a verdict) is also kept as *pending* (read-your-writes) until step 7; the payload is
   offered to each exporter's queue (step 8); ``emit()`` returns.
4. **backlog**: the frame waits in the spool (and its in-memory mirror) in sequence order.
5. **preparer** thread: takes pieces of up to ``PIECE`` frames (waiting up to the flush interval
   for one to fill) and has the sink parse them (``RecordSink.prepare``: Arrow tables, outside
   the GIL); the prepared pieces queue for the writer, about one write's worth.
6. **writer** thread: writes every piece that is ready in one ``RecordSink.write`` (up to
   ``batch_size`` records), retried with backoff while the **sink** fails;
7. **ack**: counts what was stored, quarantines what the sink refused one by one, acknowledges
   the frames (``Backlog.ack``: spent segments become spares or are deleted, blocked emitters
   wake), and tells the emitter (``delivered``), which forgets the pending traces (and verdicts)
   up to them.
   After a crash, every frame after the last acknowledgement is read again at start-up.
8. **export** (each exporter's own thread, :class:`~ingest.pipeline.export_queue.ExportQueue`):
   best-effort, beside steps 4-7 and independent of them. The queue holds ``queue_size`` records
   (full: the newest are dropped, counted); batches are validated (unchecked traces) and written
   with their own retries. The spool knows nothing of it: the store alone is durable.

Sinks
-----
Every sink, the store and each exporter, is a :class:`~ingest.record_sink.RecordSink` (its
docstring says what a sink must do and which failures are retried or quarantined). Each has its
counters in ``PipelineStats.sinks`` (exported with a ``sink`` label): a sink that fails or is
slow delays nothing of another's and is seen failing in its own counters.

Threads
-------
- the callers of ``emit()``: request handlers, intake workers, the file importer;
- ``trace-preparer`` and ``trace-writer`` (:class:`~ingest.pipeline.batcher.Batcher`), steps 5-7;
- ``spool-keeper`` (the batcher's too): prefaults spool pages ahead of ``emit()`` and runs
  the ``interval`` fsync policy;
- ``trace-export-<name>``: one per exporter, step 8.

Locks, each made and owned by one object
----------------------------------------
- ``Backlog.lock`` (and ``Backlog.room``, a condition on it): the append order. ``emit()`` holds
  it around encode, append and filing the pending trace, ``TraceEmitter.delivered`` while it
  forgets them; waiting for room releases it, so the batcher's threads, which take it through
  their callbacks (a quarantine record is emitted, ``delivered``) and through the backlog (to
  wake waiting emitters), never wait for a blocked ``emit()``.
- ``Backlog._seq_lock``: the next sequence number (``append`` against the preparer reopening an
  unusable spool).
- ``Batcher._hand_lock``: the count of frames taken but not yet acknowledged (``in_hand``).
- ``Batcher._done``: a condition on the finished count, for ``flush()`` (which also makes the
  preparer send what it has at once).
- ``DurableSpool._read_lock``: the segment list, between ``emit()`` starting a new segment and
  the batcher reading and acknowledging; ``Mirror._lock``: the mirror's lists.
- ``PendingVerdicts._lock``: the verdicts not stored yet, filed under ``Backlog.lock`` and read
  from the request threads (``TraceEmitter.pending_verdicts``).
- ``Quarantine._lock``: appends to the quarantine file.
- ``ExportQueue._lock`` (and ``_done``, a condition on it): one exporter's queue and counters;
  ``emit()`` takes it under ``Backlog.lock`` to offer a record, the exporter's thread alone.
- ``Origins._lock``: the file and line of each intake trace on its way to the store, filed by the
  intake's threads before ``emit()`` and taken by the writer at step 7.

Modules: ``emitter``, ``pending`` (traces not stored yet, for read-your-writes), ``pending_verdicts``
(feedback records not stored yet, those a spool held at start-up included: one verdict per request),
``storage_health`` (what ``/health`` says of storage), ``backlog``, ``batcher``, ``origins`` (where an
intake trace came from, for a refusal at step 7), ``sink_calls`` (the
batcher's prepare and write calls: retries, halving, quarantine), ``priority`` (storage threads
yield the CPU), ``export_queue``, ``stats`` (the counters), ``quarantine`` (bad records, kept with
their reason) and ``metrics`` (the counters as a Prometheus collector).
"""
