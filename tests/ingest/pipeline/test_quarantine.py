"""What the quarantine keeps of a refused record: never text that could be a raw query."""

from __future__ import annotations

import orjson

from ingest.pipeline.quarantine import REDACTED, Quarantine
from schemas.trace import DecisionTrace
from tests.factories import make_trace


def test_values_that_do_not_fit_their_field_are_redacted_like_unknown_fields() -> None:
    record = orjson.loads(make_trace("req_q1").model_dump_json())
    record["query_hash"] = "合同第3条的违约责任是什么"  # a raw query where a hash belongs
    record["prompt"] = "合同第3条的违约责任是什么"  # and one in a field of its own
    record["candidates"][0]["rank"] = "first, for 合同"  # a nested field of the wrong type
    raw = orjson.dumps(record)

    rec = Quarantine(None).record(kind="trace", source="test", reason="invalid", raw=raw, model=DecisionTrace)

    assert rec.raw is not None and "合同" not in rec.raw
    kept = orjson.loads(rec.raw)
    assert kept["query_hash"] == kept["prompt"] == kept["candidates"][0]["rank"] == REDACTED
    # What fits its field stays readable for the operator.
    assert kept["request_id"] == "req_q1" and kept["candidates"][1]["instance"] == "v4-b"
    assert kept["outcome"]["http_status"] == 200
