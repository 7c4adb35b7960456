"""Resilience and economics: breakers, router modes, affinity, budgets and throttles (issue #19).

State that several gateway processes must agree on lives behind :class:`SharedState`
(:mod:`router_core.resilience.shared`): :class:`MemoryShared` in one process, a Redis
implementation across processes. Nothing on the request path waits on Redis: token buckets are
served from local leases refilled in the background, counters are flushed in batches, bindings are
read from a local mirror (:mod:`router_core.resilience.redis_shared`).
"""
