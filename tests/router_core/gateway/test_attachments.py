"""An attachment type no model accepts, or a malformed attachment, is an OpenAI-style 400 no instance sees."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.router_core.decide.test_attachments import DOCX, PDF
from tests.router_core.gateway.gateway_kit import gateway_client
from tests.router_core.gateway.test_forwarding import OK_BODY, MemoryHooks

ACCEPT = {"m": ["pdf", "png"]}


@asynccontextmanager
async def fleet(calls: list[str]) -> AsyncIterator[tuple[TestClient[Any, Any], MemoryHooks]]:
    """A gateway over instances a and b (model m, which accepts pdf and png); ``calls`` logs chat requests."""
    def chat(iid: str) -> Any:
        async def handler(_: web.Request) -> web.Response:
            calls.append(iid)
            return web.Response(body=orjson.dumps(OK_BODY), content_type="application/json")
        return handler

    async with gateway_client({iid: chat(iid) for iid in ("a", "b")},
                              sections={"routing": {"attachments": {"accept": ACCEPT}}}) as (client, hooks):
        yield client, hooks


def with_file(data: str, filename: str, model: str = "auto") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "summarise this PDF"},
        {"type": "file", "file": {"filename": filename, "file_data": data}}]}]}


@dataclass(frozen=True)
class Case:
    id: str
    body: dict[str, Any]
    status: int
    error: dict[str, Any] | None  # None: served
    file_types: list[str]


WORD_AS_PDF = ("the attachment in messages[0].content[1] is a Word document (docx) although declared as PDF; "
               "no model here accepts docx")
CASES = [
    Case("word-file-said-to-be-pdf", with_file(base64.b64encode(DOCX).decode(), "contract.pdf"), 400,
         {"message": WORD_AS_PDF, "type": "invalid_request_error", "param": "messages[0].content[1]",
          "code": "unsupported_attachment_type"}, ["docx"]),
    Case("the-requested-model-too", with_file(base64.b64encode(DOCX).decode(), "contract.pdf", model="m"), 400,
         {"message": WORD_AS_PDF, "type": "invalid_request_error", "param": "messages[0].content[1]",
          "code": "unsupported_attachment_type"}, ["docx"]),
    Case("malformed-base64", with_file("JVBERi0x!!!", "a.pdf"), 400,
         {"message": "invalid base64: its length (11) is not a multiple of 4", "type": "invalid_request_error",
          "param": "messages[0].content[1].file.file_data", "code": "invalid_attachment"}, []),
    Case("a-real-pdf-is-served", with_file(base64.b64encode(PDF).decode(), "a.pdf"), 200, None, ["pdf"]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_attachments_at_the_gateway(case: Case) -> None:
    async def go() -> tuple[int, Any, Any, list[str]]:
        calls: list[str] = []
        async with fleet(calls) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=case.body)
            return resp.status, await resp.json(), hooks.traces[resp.headers["x-request-id"]], calls

    status, body, trace, calls = asyncio.run(go())
    assert status == case.status
    assert trace.outcome.http_status == case.status and trace.features.file_types == case.file_types
    if case.error is None:
        assert body == OK_BODY and len(calls) == 1
        return
    assert body == {"error": case.error}
    assert calls == []  # refused before any instance saw it
