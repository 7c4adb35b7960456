"""The floor under any Python gateway here: aiohttp + uvloop + RouteLens's upstream client, and nothing else.

It forwards each ``POST /v1/chat/completions`` to one upstream and relays the answer: no routing, no
trace, no metrics, no checks. ``python -m bench gateway`` measures it beside RouteLens on the same
backend, so what the HTTP stack and the extra hop cost on this machine is told apart from what
RouteLens's own work adds. ``python -m bench.bare_proxy --port P --upstream URL`` runs it; it prints
``bare proxy ready`` once listening.
"""

from __future__ import annotations

import argparse
import sys

import uvloop
from aiohttp import web

from router_core.gateway.http1 import Http1Pool

__all__ = ["bare_app"]


def bare_app(upstream: str) -> web.Application:
    """The proxy's application: one route, one upstream connection pool."""
    pool = Http1Pool()
    headers = {"Content-Type": "application/json"}

    async def forward(request: web.Request) -> web.Response:
        resp = await pool.post(upstream, await request.read(), headers)
        body = await resp.read()
        resp.release()
        return web.Response(status=resp.status, body=body, content_type="application/json")

    async def close(_: web.Application) -> None:
        await pool.close()

    app = web.Application()
    app.router.add_post("/v1/chat/completions", forward)
    app.on_cleanup.append(close)
    return app


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bare_proxy")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", required=True, help="the chat-completions URL to forward to")
    args = p.parse_args(argv)
    uvloop.install()
    web.run_app(bare_app(args.upstream), host="127.0.0.1", port=args.port, access_log=None,
                print=lambda *_: print("bare proxy ready", flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
