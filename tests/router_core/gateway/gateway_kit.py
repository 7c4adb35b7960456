"""A real gateway in-process against stub upstreams, with config overrides (shared by the gateway tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from itertools import count
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web_runner import BaseRunner

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.gateway.policy_gate import PolicyGate
from router_core.rules.load import compile_policy
from schemas.config import RouteLensConfig
from schemas.trace import DecisionTrace
from tests.router_core.gateway.test_forwarding import KV, MemoryHooks, upstream

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


@asynccontextmanager
async def gateway_client(handlers: dict[str, Handler], gateway: dict[str, Any] | None = None,
                         **options: Any) -> AsyncIterator[tuple[TestClient[Any, Any], MemoryHooks]]:
    """:func:`served_gateway`'s client and hooks, the gateway trying 2 instances, 5 s each (``gateway`` overrides)."""
    async with served_gateway(handlers, gateway={"max_attempts": 2, "upstream_timeout_s": 5.0, **(gateway or {})},
                              **options) as (client, hooks, _):
        yield client, hooks


async def started_fleet(stack: AsyncExitStack, handlers: dict[str, Handler],
                        instances: dict[str, dict[str, Any]] | None = None, **sections: Any) -> RouteLensConfig:
    """Start an upstream per ``handlers`` entry (closed with ``stack``); the configuration of that fleet (model m).

    ``instances`` adds fields to an instance's entry; ``sections`` are further sections (``gateway``...).
    The scrape interval is 60 s: the tests' instances report their state at the first scrape only.
    """
    servers = {iid: TestServer(upstream(h, KV[iid])) for iid, h in handlers.items()}
    for server in servers.values():
        await server.start_server()
        stack.push_async_callback(server.close)
    return RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/"),
                                 **(instances or {}).get(iid, {})} for iid, s in servers.items()]},
        "scrape": {"interval_s": 60},
        **sections,
    })


@asynccontextmanager
async def served_gateway(
    handlers: dict[str, Handler],
    *,
    gateway: dict[str, Any] | None = None,
    instances: dict[str, dict[str, Any]] | None = None,
    perf: Callable[[], float] | None = None,
    policy: str | None = None,
    sections: dict[str, Any] | None = None,
    hash_key: str | None = None,
    as_served: bool = False,
) -> AsyncIterator[tuple[TestClient[Any, Any], MemoryHooks, Gateway]]:
    """Yield a client of a gateway whose instances ("a" ranked before "b") run ``handlers``, its hooks and itself.

    ``gateway`` is the gateway section (none: the defaults); ``instances`` adds fields to an instance's entry;
    ``policy`` is a routing policy file's text (YAML), compiled against the fleet; ``sections`` are
    further configuration sections (``routing``, ``resilience``...); ``hash_key`` the query hash's key.
    ``as_served``: a client that disconnects does not cancel its request's handler, as under ``serve``
    (``web.run_app``'s default; aiohttp's test server cancels it). Request ids are ``req-0``, ``req-1``...
    """
    async with AsyncExitStack() as stack:
        config = await started_fleet(stack, handlers, instances,
                                     **({} if gateway is None else {"gateway": gateway}), **(sections or {}))
        hooks = MemoryHooks()
        ids = (f"req-{i}" for i in count())
        gate = None if policy is None else PolicyGate(config, compile_policy(policy, "policy.yaml", config),
                                                      hash_key=hash_key)
        gw = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids), policy=gate, hash_key=hash_key,
                     **({"perf": perf} if perf else {}))
        server = (ServedTestServer if as_served else TestServer)(gw.build_app())
        client = await stack.enter_async_context(TestClient(server))
        yield client, hooks, gw


@asynccontextmanager
async def metrics_only_fleet(scrape: dict[str, Any]) -> AsyncIterator[RouteLensConfig]:
    """A config of one instance ``a`` (model ``m``) whose live upstream answers only ``GET /metrics``.

    The instance is idle (nothing waiting, KV cache at 10%); ``scrape`` is the config's scrape section.
    The upstream closes when the block ends.
    """
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text='vllm:num_requests_waiting{model_name="m"} 0\nvllm:kv_cache_usage_perc 0.1\n')

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    server = TestServer(app)
    await server.start_server()
    try:
        yield RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": "a", "model": "m", "url": str(server.make_url("")).rstrip("/")}]},
            "scrape": scrape,
        })
    finally:
        await server.close()


class ServedTestServer(TestServer):
    """aiohttp's test server, its handlers left running when their client goes (as ``serve`` runs them)."""

    async def _make_runner(self, **kwargs: Any) -> BaseRunner:
        return await super()._make_runner(**{**kwargs, "handler_cancellation": False})


def trace_of(hooks: MemoryHooks, headers: Any) -> DecisionTrace:
    """The one trace of the response whose headers are ``headers``."""
    return hooks.traces[headers["x-request-id"]]


def sse(*chunks: dict[str, Any] | str) -> list[bytes]:
    """SSE events: dicts as JSON, strings as they are (``[DONE]``)."""
    return [b"data: " + (c.encode() if isinstance(c, str) else orjson.dumps(c)) + b"\n\n" for c in chunks]
