"""The store's check on Arrow columns refuses the times the contract refuses (``schemas.common.UtcTime``).

A ts outside 1970 .. 9999 in UTC, or one without a zone, is refused by pydantic; the columns' check
must refuse it too (so that the batch goes to pydantic, which names the field), never store it.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from bench.synthetic import TraceFactory
from ingest.codec import fast_decoder
from ingest.codec.unchecked import CONTRACT_FROM, check_traces, stored_form_error
from ingest.kinds import Kind
from ingest.record_sink import RecordBatch
from tests.ingest.codec.test_contract import _fast, _payload, _traces

pytestmark = pytest.mark.skipif(not fast_decoder.AVAILABLE, reason="the C decoder is not built")

REFUSED = [
    "0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:30:00-01:00",  # past Python's years
    "1969-12-31T23:59:59.999999Z", "1970-01-01T00:30:00+01:00", "9999-12-31T00:00:00Z",  # past the contract's
    "2026-11-01T00:00:00", "2026-11-01 00:00:00.5", "2026-11-01T00:00:00.123456",  # no zone
]
ACCEPTED = ["1970-01-01T00:00:00Z", "1970-01-01T00:30:00-01:00", "2026-11-01T00:00:00+05:30"]
# Inside the contract, but within a day of Python's last: the columns leave them to pydantic, which takes them.
LAST_DAY = ["9999-12-30T23:59:59.999999Z", "9999-12-31T00:30:00+01:00"]


def _with(payload: bytes, **changes: Any) -> bytes:
    return orjson.dumps(orjson.loads(payload) | changes)


def _since(payload: bytes, value: str) -> bytes:
    """``payload`` with every violation's ``since`` set to ``value`` (at least one)."""
    doc = orjson.loads(payload)
    places = [v for c in doc["candidates"] for v in c["violations"]]
    assert places
    for violation in places:
        violation["since"] = value
    return orjson.dumps(doc)


@pytest.mark.parametrize("ts", REFUSED)
def test_the_columns_and_pydantic_refuse_a_time_the_contract_refuses(ts: str) -> None:
    plain, latched = (_payload(t) for t in _traces())
    for payload in (_with(plain, ts=ts), _with(latched, ts=ts)):
        reason = stored_form_error(payload)
        assert reason is not None and "\nts\n" in reason, reason
        assert not _fast(payload)
    nested = _since(latched, ts)
    reason = stored_form_error(nested)
    assert reason is not None and ".since\n" in reason, reason
    assert not _fast(nested)


@pytest.mark.parametrize("ts", ACCEPTED + LAST_DAY)
def test_the_columns_and_pydantic_take_a_time_inside_the_contract(ts: str) -> None:
    plain, latched = (_payload(t) for t in _traces())
    for payload in (_with(plain, ts=ts), _with(latched, ts=ts), _since(latched, ts)):
        assert stored_form_error(payload) is None
        assert _fast(payload) is (ts not in LAST_DAY)
        assert check_traces(RecordBatch({Kind.TRACE_UNCHECKED: [payload] * CONTRACT_FROM})).rejected == []


def test_a_checked_batch_refuses_a_ts_outside_the_years_by_name_and_keeps_the_rest() -> None:
    """Before, the columns sent the batch to pydantic, which took it: the store then failed on it for ever."""
    good = [_payload(t) for t in TraceFactory(seed=31, n_candidates=3).traces(CONTRACT_FROM)]
    bad = [_with(good[i], request_id=f"req_bad{i}", ts=ts) for i, ts in enumerate(REFUSED[:3])]
    batch = RecordBatch({Kind.TRACE_UNCHECKED: [*good[:5], *bad, *good[5:]]})
    checked = check_traces(batch)
    assert batch.payloads == {Kind.TRACE: good} and checked.table is None
    assert [r.payload for r in checked.rejected] == bad
    assert all(r.kind is Kind.TRACE and "\nts\n" in r.reason for r in checked.rejected)


def test_a_batch_of_zoned_times_is_still_checked_on_its_columns() -> None:
    """The search for a time without a zone finds none in what a gateway writes: no fall back to pydantic."""
    payloads = [_payload(t) for t in TraceFactory(seed=32, n_candidates=3).traces(CONTRACT_FROM)]
    payloads.append(_since(_payload(_traces()[1]), "2026-11-01T00:00:00+05:30"))
    checked = check_traces(RecordBatch({Kind.TRACE_UNCHECKED: payloads}))
    assert checked.rejected == [] and checked.table is not None
