"""The trace pipeline: emitter, backlog, batcher, counters, quarantine and their Prometheus collector."""
