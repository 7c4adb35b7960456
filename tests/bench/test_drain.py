"""``bench.drain``: a slice's CPU is read once the gateway's pipeline has stored and exported what it emitted."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench.drain import drained, left_in_pipeline, store_url_of

METRICS = """# HELP routelens_traces_pending Records emitted, not yet stored.
# TYPE routelens_traces_pending gauge
routelens_traces_pending {pending}
# TYPE routelens_sink_queued_records gauge
routelens_sink_queued_records{{sink="store"}} {pending}
routelens_sink_queued_records{{sink="otel"}} {otel}
routelens_traces_pending_total 99.0
"""


def test_what_is_left_counts_the_backlog_and_every_exporter_queue_only() -> None:
    assert left_in_pipeline(METRICS.format(pending=3.0, otel=2.0)) == 8.0
    assert left_in_pipeline(METRICS.format(pending=0.0, otel=0.0)) == 0.0
    assert left_in_pipeline("# nothing of ours\nprocess_cpu_seconds_total 1.0\n") == 0.0


@contextmanager
def gateway_metrics(readings: list[tuple[float, float]]) -> Iterator[tuple[str, list[int]]]:
    """A loopback ``/metrics`` answering ``readings`` in turn (the last for ever); yields its URL and scrape count."""
    scrapes = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            pending, otel = readings[min(scrapes[0], len(readings) - 1)]
            scrapes[0] += 1
            body = METRICS.format(pending=pending, otel=otel).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", scrapes
    finally:
        server.shutdown()
        server.server_close()


def test_drained_waits_until_the_store_and_the_exporters_have_everything() -> None:
    with gateway_metrics([(40.0, 12.0), (5.0, 12.0), (0.0, 3.0), (0.0, 0.0)]) as (url, scrapes):
        assert drained(url, poll_s=0.001)() is True
        assert scrapes[0] == 4  # not before the exporter's queue was empty too


def test_drained_gives_up_at_its_timeout_and_says_so() -> None:
    with gateway_metrics([(7.0, 0.0)]) as (url, scrapes):
        assert drained(url, timeout_s=0.2, poll_s=0.01)() is False
        assert scrapes[0] >= 2


def test_with_several_workers_it_wants_zero_readings_in_a_row() -> None:
    # a scrape reaches one worker: one worker at 0 while another still holds records is not drained
    with gateway_metrics([(0.0, 0.0), (4.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)]) as (url, scrapes):
        assert drained(url, confirm=3, poll_s=0.001)() is True
        assert scrapes[0] == 5


def test_with_a_store_process_it_waits_for_the_store_once_the_gateway_is_empty() -> None:
    with gateway_metrics([(0.0, 0.0)]) as (gateway, at_gateway), \
            gateway_metrics([(9.0, 0.0), (2.0, 0.0), (0.0, 0.0)]) as (store, at_store):
        assert drained(gateway, poll_s=0.001, store_url=store.removesuffix("/metrics"))() is True
        assert at_gateway[0] == 1 and at_store[0] == 3  # the store had not written its last batch yet
    with gateway_metrics([(0.0, 0.0)]) as (gateway, _), gateway_metrics([(5.0, 0.0)]) as (store, _):
        assert drained(gateway, timeout_s=0.2, poll_s=0.01, store_url=store.removesuffix("/metrics"))() is False


def test_the_store_url_is_read_from_what_serve_printed() -> None:
    printed = ("notice: the gateway is open\n[store] store ready http://127.0.0.1:41234\n"
               "gateway ready http://127.0.0.1:8080\n")
    assert store_url_of(printed) == "http://127.0.0.1:41234"
    assert store_url_of("gateway ready http://127.0.0.1:8080\n") is None  # the store in the gateway's process
