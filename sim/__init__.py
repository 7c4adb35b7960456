"""RouteLens simulator room: a fleet of simulated vLLM-compatible instances and their traffic.

Modules (imported on demand, so ``import sim`` stays cheap and pulls in no HTTP client):

- :mod:`sim.server`: one instance, ``build_instance_app(spec, profile, settings)``.
- :mod:`sim.exposition`: its ``/metrics`` under vLLM's names, and the admin overrides.
- :mod:`sim.fleet`: ``start_fleet(config)`` and ``run_fleet(config)`` for every configured instance.
- :mod:`sim.traffic`: ``run_traffic(base_url, rps=...)`` through the gateway with the OpenAI SDK.
- :mod:`sim.corpus`: the Chinese and English query corpus, canned answers, token estimate.

``sim`` imports only :mod:`schemas` from RouteLens and is never imported by ``router_core``.
"""
