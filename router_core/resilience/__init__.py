"""Resilience and economics as state machines: breakers, router modes, affinity, budgets, throttles (issue #19).

What several gateway processes must agree on they keep behind :class:`router_core.shared.SharedState`
(:mod:`router_core.shared`: in memory in one process, in Redis across processes); nothing here
imports the gateway, and nothing on the request path waits on Redis.
"""
