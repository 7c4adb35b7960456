"""A local HTTP server that speaks the Elasticsearch contract, for the official client to talk to.

Every request is checked by :class:`Contract` (and so is every answer it gives); problems are kept
in :attr:`ContractServer.violations` for the test to assert on. Bulk answers follow the documented
examples, per-item errors included; faults can be scripted: whole requests answered 503 or 429,
single items answered 429, refused as unparseable, or every item refused with a given status.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.ingest.es_contract.contract import Contract
from tests.ingest.es_contract.engine import Engine, Unsupported

CONTENT_TYPE = "application/vnd.elasticsearch+json;compatible-with=9"


@dataclass
class Faults:
    """Scripted failures, consumed as requests arrive."""

    whole: list[int] = field(default_factory=list)  # statuses for the next requests (503, 429, ...)
    item_429: int = 0  # the next N bulk items answer 429
    refuse_ids: set[str] = field(default_factory=set)  # these _ids answer 400 mapper errors
    item_refusal: tuple[int, str] | None = None  # while set, every bulk item answers (status, error type)


class ContractServer:
    """Serves on 127.0.0.1 in a background thread; ``url`` is its base URL."""

    def __init__(self, contract: Contract | None = None) -> None:
        self.contract = contract or Contract.shared()
        self.engine = Engine()
        self.faults = Faults()
        self.requests: list[tuple[str, str]] = []
        self.violations: list[str] = []
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"owner": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ContractServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def count(self, stream: str) -> int:
        with self.lock:
            return len(self.engine.streams.get(stream, {}))

    def handle(self, method: str, raw_path: str, body: bytes) -> tuple[int, Any]:
        parts = urlsplit(raw_path)
        path, query = unquote(parts.path), dict(parse_qsl(parts.query, keep_blank_values=True))
        with self.lock:
            self.requests.append((method, path))
            op, problems = self.contract.check_request(method, path, query, body)
            self.violations += [f"{method} {path}: {p}" for p in problems]
            if op is None:
                return 404, _error(404, "no_handler_found_exception", f"no handler for {method} {path}")
            if self.faults.whole:
                status = self.faults.whole.pop(0)
                kind = "es_rejected_execution_exception" if status == 429 else "unavailable_shards_exception"
                return status, _error(status, kind, "scripted fault")
            try:
                status, data = self._dispatch(op.template, method, path, query, body)
            except Unsupported as exc:
                self.violations.append(f"{method} {path}: the stand-in does not implement {exc}")
                return 400, _error(400, "illegal_argument_exception", str(exc))
            answer = self.contract.check_response(op, status, data)
            self.violations += [f"answer to {method} {path}: {p}" for p in answer]
            return status, data

    def _dispatch(self, template: str, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
        segments = path.strip("/").split("/")
        if template == "/_index_template/{name}" and method in ("PUT", "POST"):
            self.engine.templates[segments[1]] = json.loads(body)
            return 200, {"acknowledged": True}
        if template.endswith("_bulk"):
            return 200, self._bulk(body, segments[0] if len(segments) == 2 else None)
        if template.endswith("_search"):
            includes = query["_source_includes"].split(",") if "_source_includes" in query else None
            stream = segments[0]
            if stream not in self.engine.streams and query.get("ignore_unavailable") != "true":
                return 404, _error(404, "index_not_found_exception", f"no such index [{stream}]")
            return 200, self.engine.search(stream, json.loads(body or b"{}"), includes)
        raise Unsupported(f"{method} {template}")

    def _bulk(self, body: bytes, default_index: str | None) -> dict[str, Any]:
        lines = [json.loads(ln) for ln in body.split(b"\n") if ln.strip()]
        items = []
        for action, source in zip(lines[0::2], lines[1::2], strict=True):
            (op, meta), = action.items()
            if op not in ("create", "index"):
                raise Unsupported(f"bulk {op} on a data stream")
            stream, doc_id = meta.get("_index", default_index), str(meta["_id"])
            seq: int | None = None
            if self.faults.item_429:
                self.faults.item_429 -= 1
                status, err = 429, {"type": "es_rejected_execution_exception", "reason": "rejected execution"}
            elif self.faults.item_refusal is not None:
                status, kind = self.faults.item_refusal
                err = {"type": kind, "reason": f"scripted {kind} for [{doc_id}]"}
            elif doc_id in self.faults.refuse_ids:
                status, err = 400, {"type": "document_parsing_exception", "reason": f"[1:2] failed to parse [{doc_id}]"}
            elif op == "index":
                status, err, seq = self._index(stream, doc_id, meta, source)
            else:
                status, err = self.engine.create(stream, doc_id, source)
            backing = stream if stream.startswith(".ds-") else f".ds-{stream}-000001"
            item: dict[str, Any] = {"_index": backing, "_id": doc_id, "status": status}
            if err is None:
                item.update({"_version": 1 if op == "create" else 2, "result": "created" if op == "create" else
                             "updated", "_seq_no": seq or 0, "_primary_term": 1,
                             "_shards": {"total": 1, "successful": 1, "failed": 0}})
            else:
                item["error"] = {**err, "index_uuid": "aAsFqTI0Tc2W0LCWgPNrOA", "shard": "0", "index": stream}
            items.append({op: item})
        return {"took": 3, "errors": any("error" in next(iter(i.values())) for i in items), "items": items}

    def _index(self, index: str, doc_id: str, meta: dict[str, Any],
               source: dict[str, Any]) -> tuple[int, dict[str, Any] | None, int | None]:
        """An ``index`` operation: as Elasticsearch answers it, only on a backing index, at a sequence number."""
        if not index.startswith(".ds-"):
            return 400, {"type": "illegal_argument_exception",
                         "reason": "only write ops with an op_type of create are allowed in data streams"}, None
        stream = index[4:].removesuffix("-000001")
        if "if_seq_no" not in meta or "if_primary_term" not in meta:
            return 400, {"type": "illegal_argument_exception", "reason": (
                "index request with op_type=index and no if_primary_term and if_seq_no set targeting backing "
                f"indices is disallowed. Target the corresponding data stream [{stream}] instead")}, None
        return self.engine.index(stream, doc_id, source, int(meta["if_seq_no"]), int(meta["if_primary_term"]))


def _error(status: int, kind: str, reason: str) -> dict[str, Any]:
    return {"error": {"type": kind, "reason": reason, "root_cause": [{"type": kind, "reason": reason}]},
            "status": status}


class _Handler(BaseHTTPRequestHandler):
    owner: ContractServer
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, data = self.owner.handle(self.command, self.path, body)
        payload = b"" if self.command == "HEAD" else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@contextmanager
def contract_server() -> Iterator[ContractServer]:
    with ContractServer() as server:
        yield server
