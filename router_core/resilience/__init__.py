"""Resilience and economics: breakers, router modes, affinity, budgets and throttles (issue #19).

State that several gateway processes must agree on lives behind :class:`SharedState`
(:mod:`router_core.resilience.shared`): :class:`MemoryShared` in one process, a Redis
implementation across processes. Reads on the request path are local; Redis is written to and
listened to, never waited on per request except for a shared token bucket.
"""
