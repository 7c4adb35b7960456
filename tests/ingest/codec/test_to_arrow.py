import pytest

from bench.synthetic import TraceFactory
from ingest.codec import to_arrow
from ingest.codec.encoder import Encoder
from ingest.codec.to_arrow import parse_payloads
from ingest.kinds import Kind


def trace_payloads(factory: TraceFactory, n: int) -> list[bytes]:
    enc = Encoder()
    return [p for t in factory.traces(n) for kind, p in enc.encode(t) if kind is Kind.TRACE]


def test_a_parsed_table_keeps_its_values_when_the_next_batch_reuses_the_buffer(
    factory: TraceFactory, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(to_arrow, "_decoder", lambda kind: None)  # Arrow's reader, with its reused buffer
    ids = [t.request_id for t in TraceFactory(seed=11, n_candidates=4, round_every=5).traces(40)]
    first, second = trace_payloads(factory, 40), trace_payloads(factory, 60)
    table, rejected = parse_payloads(Kind.TRACE, first)
    assert table is not None and not rejected
    before = table.to_pylist()
    parse_payloads(Kind.TRACE, second)  # longer: the buffer is overwritten, and grown
    parse_payloads(Kind.TRACE, second[:5])
    assert table.to_pylist() == before
    assert [row["request_id"] for row in before] == ids


def test_only_the_records_arrow_cannot_hold_are_refused(factory: TraceFactory) -> None:
    good = trace_payloads(factory, 3)
    bad = good[1].replace(b'"latency_ms":', b'"latency_ms":"slow","x":', 1)
    table, rejected = parse_payloads(Kind.TRACE, [good[0], bad, good[2]])
    assert table is not None and table.num_rows == 2
    assert [r.payload for r in rejected] == [bad] and "cannot be stored" in rejected[0].reason
