"""A request aiohttp cannot parse is the client's fault: a 400 and one warning line, never a logged traceback."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp import web
from aiohttp.http_exceptions import LineTooLong

from router_core.gateway.errors import ParseErrorsQuiet


async def _ok(_: web.Request) -> web.Response:
    return web.json_response({})


async def _exchange(raw: bytes) -> bytes:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(raw)
        await writer.drain()
        answer = await reader.read(4096)
        writer.close()
        await writer.wait_closed()
        return answer
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("raw", [
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\nContent-Length: 2\r\n\r\n{}",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n{}",
])
def test_a_malformed_request_is_a_400_and_one_warning(raw: bytes, caplog: pytest.LogCaptureFixture) -> None:
    ParseErrorsQuiet.install()
    ParseErrorsQuiet.install()  # once is enough: a second install adds nothing
    assert sum(isinstance(f, ParseErrorsQuiet) for f in logging.getLogger("aiohttp.server").filters) == 1
    with caplog.at_level(logging.DEBUG, logger="aiohttp.server"):
        answer = asyncio.run(_exchange(raw))
    assert answer.startswith(b"HTTP/1.0 400") or answer.startswith(b"HTTP/1.1 400"), answer[:80]
    records = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert records and all(r.exc_info is None and r.levelno == logging.WARNING for r in records), records
    assert records[0].getMessage().startswith("refused a malformed HTTP request (400 BadHttpMessage")


def test_the_line_holds_the_status_the_type_and_the_peer_and_nothing_of_the_request() -> None:
    exc = LineTooLong(b"Bearer CANARY-secret" * 10, 65536)  # aiohttp quotes the start of the line
    record = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, "Error handling request from %s",
                               ("10.0.0.7",), (type(exc), exc, None))
    assert ParseErrorsQuiet().filter(record)
    assert record.getMessage() == "refused a malformed HTTP request (400 LineTooLong) from 10.0.0.7"
    assert record.exc_info is None and record.levelno == logging.WARNING


def test_other_records_of_the_server_pass_unchanged() -> None:
    record = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, "Error handling request", (), None)
    try:
        raise RuntimeError("a real fault")
    except RuntimeError as exc:
        record.exc_info = (type(exc), exc, exc.__traceback__)
    assert ParseErrorsQuiet().filter(record) and record.levelno == logging.ERROR and record.exc_info is not None
