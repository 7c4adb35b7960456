"""The OpenAI-compatible HTTP gateway: aiohttp server, one pooled aiohttp client."""

from router_core.gateway.server import Gateway, TraceHooks

__all__ = ["Gateway", "TraceHooks"]
