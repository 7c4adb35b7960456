import json

import jsonschema
import pyarrow as pa
import pytest

from schemas.derive import arrow_schema, arrow_type, json_schema
from schemas.trace import DecisionTrace
from tests.factories import make_trace


def test_arrow_schema_covers_every_top_level_field() -> None:
    schema = arrow_schema()
    assert schema.names == list(DecisionTrace.model_fields)
    assert schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert schema.field("experiment_arm").nullable
    assert not schema.field("request_id").nullable


def test_nested_models_become_structs_and_lists() -> None:
    schema = arrow_schema()
    candidates = schema.field("candidates").type
    assert pa.types.is_list(candidates)
    item = candidates.value_type
    assert pa.types.is_struct(item)
    assert pa.types.is_list(item.field("violations").type)
    assert pa.types.is_struct(item.field("state").type)


def test_a_trace_converts_to_arrow_and_back() -> None:
    trace = make_trace()
    table = pa.Table.from_pylist([trace.model_dump()], schema=arrow_schema())
    assert DecisionTrace.model_validate(table.to_pylist()[0]) == trace


def test_unsupported_annotations_fail_loudly() -> None:
    with pytest.raises(TypeError):
        arrow_type(dict[str, int])
    with pytest.raises(TypeError):
        arrow_type(int | str)


def test_json_schema_validates_a_real_trace_and_rejects_unknown_fields() -> None:
    schema = json_schema()
    doc = json.loads(make_trace().model_dump_json())
    jsonschema.validate(doc, schema)
    doc["raw_query"] = "must never be stored"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)
