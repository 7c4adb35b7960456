"""An in-memory stand-in for the few Elasticsearch semantics the trace store relies on.

Data streams created from index templates, bulk ``create`` (409 on a taken ``_id``, 400 when a
value does not fit the mapping), bulk ``index`` of a document already in a backing index, as
Elasticsearch takes it (``if_seq_no`` and ``if_primary_term`` required, 409 when they are not the
document's), and searches with ``bool.filter``/``must_not`` of ``term``/``terms``/``range``,
``sort``/``search_after``, ``_source`` includes, ``seq_no_primary_term``, ``track_total_hits``
(``true``, or a number: counted up to it), and the aggregations ``date_histogram``,
``filter``, ``percentiles``, ``sum`` and ``terms``. Anything else is refused, so the store cannot
come to depend on something this stand-in only pretends to do.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from tests.quantile import quantile


class Unsupported(ValueError):
    """A request this stand-in does not implement."""


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(doc, list):
            doc = [d.get(part) if isinstance(d, dict) else None for d in doc]
        elif isinstance(doc, dict):
            doc = doc.get(part)
        else:
            return None
    return doc


def _nanos(value: Any) -> int:
    text = str(value).replace("Z", "+00:00")
    ts = datetime.fromisoformat(text)
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return int(ts.timestamp()) * 1_000_000_000 + ts.microsecond * 1000


class Engine:
    """Data streams in memory; ``templates`` by name, ``streams[name][_id] = source``."""

    def __init__(self) -> None:
        self.templates: dict[str, dict[str, Any]] = {}
        self.streams: dict[str, dict[str, dict[str, Any]]] = {}
        self.seq_no: dict[str, dict[str, int]] = {}  # each document's sequence number (one shard, primary term 1)
        self._next_seq: dict[str, int] = defaultdict(int)

    def _template_for(self, name: str) -> dict[str, Any] | None:
        best = None
        for body in self.templates.values():
            if any(name.startswith(p.rstrip("*")) for p in body.get("index_patterns", [])):
                if best is None or body.get("priority", 0) > best.get("priority", 0):
                    best = body
        return best

    def _kind(self, stream: str, path: str) -> str | None:
        props = (self._template_for(stream) or {}).get("template", {}).get("mappings", {}).get("properties", {})
        node: dict[str, Any] | None = {"properties": props}
        for part in path.split("."):
            node = (node or {}).get("properties", {}).get(part)
            if node is None:
                return None
        return str((node or {}).get("type"))

    def create(self, stream: str, doc_id: str, source: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        template = self._template_for(stream)
        if template is None or "data_stream" not in template:
            return 404, {"type": "index_not_found_exception", "reason": f"no such index [{stream}]"}
        if "@timestamp" not in source:
            reason = "data stream timestamp field [@timestamp] is missing"
            return 400, {"type": "document_parsing_exception", "reason": reason}
        problem = self._check(stream, "", source)
        if problem:
            return 400, {"type": "document_parsing_exception", "reason": problem}
        docs = self.streams.setdefault(stream, {})
        if doc_id in docs:
            return 409, {"type": "version_conflict_engine_exception",
                         "reason": f"[{doc_id}]: version conflict, document already exists"}
        docs[doc_id] = source
        self._stamp(stream, doc_id)
        return 201, None

    def _stamp(self, stream: str, doc_id: str) -> int:
        seq = self.seq_no.setdefault(stream, {})[doc_id] = self._next_seq[stream]
        self._next_seq[stream] += 1
        return seq

    def index(self, stream: str, doc_id: str, source: dict[str, Any], if_seq_no: int,
              if_primary_term: int) -> tuple[int, dict[str, Any] | None, int | None]:
        """Replace a document of ``stream``'s backing index if it is still at ``if_seq_no``: (status, error, seq_no)."""
        docs = self.streams.get(stream, {})
        if doc_id not in docs:
            return 409, {"type": "version_conflict_engine_exception", "reason":
                         f"[{doc_id}]: version conflict, document does not exist (expected [{if_seq_no}])"}, None
        held = self.seq_no[stream][doc_id]
        if (held, 1) != (if_seq_no, if_primary_term):
            return 409, {"type": "version_conflict_engine_exception", "reason":
                         f"[{doc_id}]: version conflict, required seqNo [{if_seq_no}], primary term "
                         f"[{if_primary_term}]. current document has seqNo [{held}] and primary term [1]"}, None
        problem = self._check(stream, "", source) if "@timestamp" in source else \
            "data stream timestamp field [@timestamp] is missing"
        if problem:
            return 400, {"type": "document_parsing_exception", "reason": problem}, None
        docs[doc_id] = source
        return 200, None, self._stamp(stream, doc_id)

    def _check(self, stream: str, prefix: str, value: Any) -> str | None:
        if isinstance(value, dict):
            for key, item in value.items():
                found = self._check(stream, f"{prefix}{key}", item) if not isinstance(item, dict) else \
                    self._check(stream, f"{prefix}{key}.", item)
                if found:
                    return found
            return None
        path = prefix.rstrip(".")
        kind = self._kind(stream, path)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item is None or kind is None or isinstance(item, dict):
                continue
            if kind in ("long", "double") and (isinstance(item, bool) or not isinstance(item, int | float)):
                return f"failed to parse field [{path}] of type [{kind}]"
            if kind == "date_nanos":
                try:
                    _nanos(item)
                except ValueError:
                    return f"failed to parse field [{path}] of type [date_nanos]"
        return None

    # -- search ---------------------------------------------------------------------------------
    def _matches(self, stream: str, doc: dict[str, Any], query: dict[str, Any]) -> bool:
        (kind, body), = query.items()
        if kind == "match_all":
            return True
        if kind == "bool":
            unknown = set(body) - {"filter", "must_not"}
            if unknown:
                raise Unsupported(f"bool.{sorted(unknown)}")
            return (all(self._matches(stream, doc, q) for q in body.get("filter", []))
                    and not any(self._matches(stream, doc, q) for q in body.get("must_not", [])))
        if kind == "nested":  # one element of the nested list must match the whole inner query
            path = body["path"]
            return any(self._matches(stream, {path: item}, body["query"]) for item in _get(doc, path) or [])
        if kind == "exists":  # a value that is not null (nor a list of nulls only)
            found = _get(doc, body["field"])
            return any(v is not None for v in (found if isinstance(found, list) else [found]))
        (field, arg), = body.items()
        value = _get(doc, field)
        values = value if isinstance(value, list) else [value]
        if kind == "term":
            return arg["value"] in values
        if kind == "terms":
            return any(v in arg for v in values)
        if kind == "range":
            dated = self._kind(stream, field) == "date_nanos"
            key = (lambda v: _nanos(v)) if dated else (lambda v: v)
            for v in values:
                if v is None:
                    continue
                k = key(v)
                if all({"gte": k >= key(b), "gt": k > key(b), "lt": k < key(b), "lte": k <= key(b)}[op]
                       for op, b in arg.items()):
                    return True
            return False
        raise Unsupported(f"query {kind}")

    def _sort_value(self, stream: str, doc: dict[str, Any], field: str) -> Any:
        value = _get(doc, field)
        return _nanos(value) if value is not None and self._kind(stream, field) == "date_nanos" else value

    def search(self, stream: str, body: dict[str, Any], includes: list[str] | None) -> dict[str, Any]:
        docs = [(i, d) for i, d in self.streams.get(stream, {}).items()
                if self._matches(stream, d, body.get("query", {"match_all": {}}))]
        unknown = set(body) - {"query", "size", "sort", "search_after", "aggs", "track_total_hits",
                               "seq_no_primary_term"}
        if unknown:
            raise Unsupported(f"search body {sorted(unknown)}")
        sort = [next(iter(s.items())) for s in body.get("sort", [])]
        keyed = [([self._sort_value(stream, d, f) for f, _ in sort], i, d) for i, d in docs]
        for pos in reversed(range(len(sort))):
            desc = sort[pos][1].get("order") == "desc"
            keyed.sort(key=lambda k, p=pos: (k[0][p] is None, k[0][p]), reverse=desc)
        if "search_after" in body:
            after = body["search_after"]
            keyed = [k for k in keyed if self._after(k[0], after, sort)]
        size = int(body.get("size", 10))
        hits = []
        for values, doc_id, doc in keyed[:size]:
            src = doc if not includes else {k: v for k, v in doc.items() if k in includes}
            hit: dict[str, Any] = {"_index": f".ds-{stream}-000001", "_id": doc_id, "_score": None, "_source": src}
            if sort:
                hit["sort"] = values
            if body.get("seq_no_primary_term"):
                hit.update({"_seq_no": self.seq_no[stream][doc_id], "_primary_term": 1})
            hits.append(hit)
        track = body.get("track_total_hits")
        cap = track if isinstance(track, int) and not isinstance(track, bool) and track >= 0 else None
        total = {"value": len(docs), "relation": "eq"} if cap is None or len(docs) <= cap else \
            {"value": cap, "relation": "gte"}
        resp: dict[str, Any] = {
            "took": 1, "timed_out": False, "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {"total": total, "max_score": None, "hits": hits},
        }
        if "aggs" in body:
            resp["aggregations"] = self._aggs(stream, [d for _, d in docs], body["aggs"])
        return resp

    @staticmethod
    def _after(values: list[Any], after: list[Any], sort: list[tuple[str, dict[str, Any]]]) -> bool:
        for v, a, (_, spec) in zip(values, after, sort, strict=True):
            if v == a:
                continue
            return (v < a) if spec.get("order") == "desc" else (v > a)
        return False

    def _aggs(self, stream: str, docs: list[dict[str, Any]], aggs: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, spec in aggs.items():
            sub = spec.get("aggs")
            kinds = set(spec) - {"aggs"}
            if len(kinds) != 1:
                raise Unsupported(f"aggregation {sorted(kinds)}")
            kind = kinds.pop()
            arg = spec[kind]
            if kind == "filter":
                picked = [d for d in docs if self._matches(stream, d, arg)]
                out[name] = {"doc_count": len(picked), **(self._aggs(stream, picked, sub) if sub else {})}
            elif kind == "sum":
                vals = [v for d in docs if (v := _get(d, arg["field"])) is not None]
                out[name] = {"value": float(sum(vals))}
            elif kind == "percentiles":
                vals = [v for d in docs if (v := _get(d, arg["field"])) is not None]
                out[name] = {"values": {f"{float(p)}": quantile(vals, p / 100) for p in arg["percents"]}}
            elif kind == "date_histogram":
                out[name] = {"buckets": self._histogram(stream, docs, arg, sub)}
            elif kind == "terms":
                groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
                for d in docs:
                    v = _get(d, arg["field"])
                    if v is None and "missing" not in arg:
                        continue
                    groups[arg.get("missing") if v is None else v].append(d)
                ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), str(kv[0])))[: int(arg.get("size", 10))]
                out[name] = {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
                    {"key": k, "doc_count": len(v), **(self._aggs(stream, v, sub) if sub else {})} for k, v in ordered
                ]}
            else:
                raise Unsupported(f"aggregation {kind}")
        return out

    def _histogram(self, stream: str, docs: list[dict[str, Any]], arg: dict[str, Any],
                   sub: dict[str, Any] | None) -> list[dict[str, Any]]:
        interval = arg["fixed_interval"]
        if not interval.endswith("s"):
            raise Unsupported(f"fixed_interval {interval}")
        step = int(interval[:-1]) * 1000
        groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for d in docs:
            v = _get(d, arg["field"])
            if v is not None:
                millis = _nanos(v) // 1_000_000
                groups[millis - millis % step].append(d)
        if int(arg.get("min_doc_count", 0)) != 1:
            raise Unsupported("date_histogram without min_doc_count 1")
        return [{"key": k, "key_as_string": datetime.fromtimestamp(k / 1000, UTC).isoformat(),
                 "doc_count": len(v), **(self._aggs(stream, v, sub) if sub else {})}
                for k, v in sorted(groups.items())]
