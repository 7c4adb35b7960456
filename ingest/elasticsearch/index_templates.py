"""Elasticsearch index templates, derived from the same Arrow schemas DuckDB uses.

One data stream per record kind (``<prefix>-traces``, ``<prefix>-instance_snapshots``, ...),
each with an index template from ``traces_template.json`` whose mapping is derived here:
strings are keywords (ids, hashes, names), timestamps ``date_nanos`` (no precision lost),
structs objects, and a trace's ``candidates`` ``nested`` so that a candidate's fields stay
together in queries. ``dynamic: "false"`` keeps fields a newer model adds in ``_source`` (so
reads return them) without refusing the document; the next template update indexes them.
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any

import pyarrow as pa

from ingest.codec.storage_schema import storage_schema
from ingest.kinds import KINDS, Kind
from schemas.version import SCHEMA_VERSION

__all__ = ["FEEDBACK_CONTEXT", "TIMESTAMP_FIELD", "data_stream", "es_property", "index_template", "mapping_properties"]

TIMESTAMP_FIELD = "@timestamp"
_NESTED = {(Kind.TRACE, "candidates")}
# Trace fields copied into each feedback document (``trace.*``), plus ``outcome_status`` and ``total_ms``.
FEEDBACK_CONTEXT = ("ts", "router_version", "experiment_arm", "arm_forced", "rule", "selected_model",
                    "selected_instance", "fallback_triggered", "query_hash", "policy_hash")


def data_stream(prefix: str, kind: Kind) -> str:
    """Return the data stream name of ``kind``."""
    return f"{prefix}-{KINDS[kind].table}"


def es_property(dtype: pa.DataType, *, nested: bool = False) -> dict[str, Any]:
    """Map one Arrow type to an Elasticsearch field mapping."""
    if pa.types.is_list(dtype):
        inner = es_property(dtype.value_type)
        if nested and inner.get("type") == "object":
            return {"type": "nested", "properties": inner["properties"]}
        return inner
    if pa.types.is_struct(dtype):
        return {"type": "object", "properties": {f.name: es_property(f.type) for f in dtype}}
    if pa.types.is_timestamp(dtype):
        return {"type": "date_nanos"}
    if pa.types.is_boolean(dtype):
        return {"type": "boolean"}
    if pa.types.is_integer(dtype):
        return {"type": "long"}
    if pa.types.is_floating(dtype):
        return {"type": "double"}
    return {"type": "keyword", "ignore_above": 4096}


def mapping_properties(kind: Kind) -> dict[str, Any]:
    """Return the ``properties`` of the mapping of ``kind``."""
    props = {f.name: es_property(f.type, nested=(kind, f.name) in _NESTED) for f in storage_schema(kind)}
    props[TIMESTAMP_FIELD] = {"type": "date_nanos"}
    if kind is Kind.FEEDBACK:  # the trace's context, copied in so misroutes filter like traces
        trace = mapping_properties(Kind.TRACE)
        ctx = {name: trace[name] for name in FEEDBACK_CONTEXT}
        ctx["outcome_status"] = {"type": "keyword", "ignore_above": 4096}
        ctx["total_ms"] = {"type": "double"}
        props["trace"] = {"type": "object", "properties": ctx}
    return props


def index_template(prefix: str, kind: Kind, retention_days: int) -> dict[str, Any]:
    """Return the index template body of ``kind``'s data stream."""
    text = resources.files("ingest.elasticsearch").joinpath("traces_template.json").read_text(encoding="utf-8")
    body: dict[str, Any] = copy.deepcopy(json.loads(text))
    body["index_patterns"] = [data_stream(prefix, kind) + "*"]
    body["template"]["mappings"]["properties"] = mapping_properties(kind)
    if kind is Kind.POLICY:  # a policy stays as long as any trace may name it
        body["template"]["lifecycle"] = {"enabled": True}
    else:
        body["template"]["lifecycle"]["data_retention"] = f"{retention_days}d"
    body["_meta"]["routelens"].update({"schema_version": SCHEMA_VERSION, "kind": KINDS[kind].name})
    return body
