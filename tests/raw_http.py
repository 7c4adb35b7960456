"""Raw HTTP/1.1 over a socket to 127.0.0.1, for requests no client library sends: bytes that are not UTF-8 in a
header, control characters, lines over 64 KiB, TLS bytes on a plain port."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from typing import Any

import orjson

CHAT = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]})


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


def request(headers: list[tuple[bytes, bytes]], body: bytes = CHAT, *, method: bytes = b"POST",
            target: bytes = b"/v1/chat/completions") -> bytes:
    """A request's bytes, with ``Host``, ``Content-Type``, ``Content-Length`` and ``Connection: close`` added."""
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Content-Type: application/json",
             b"Content-Length: " + str(len(body)).encode(), b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def parse(data: bytes) -> Answer:
    """The status, headers and body of one answer (the server closed the connection after it)."""
    head, _, body = data.partition(b"\r\n\r\n")
    first, *rest = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in rest:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(first.split()[1]), headers, body)


def exchange(port: int, raw: bytes, timeout_s: float = 20) -> Answer:
    """Send ``raw``, read until the server closes, parse the answer (blocking: for servers in other processes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return parse(data)


async def exchange_async(port: int, raw: bytes) -> Answer:
    """:func:`exchange` inside an event loop (for a server in this process)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        data = await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    return parse(data)
