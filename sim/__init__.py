"""RouteLens simulator room: simulated vLLM-compatible instances, their faults, traffic and drills.

Modules (imported on demand, so ``import sim`` stays cheap and pulls in no HTTP client):

- :mod:`sim.server`: one instance, ``build_instance_app(spec, profile, settings)``; answers in
  :mod:`sim.render`, requests checked by :mod:`sim.openai_api`, admin routes in :mod:`sim.admin`.
- :mod:`sim.engine`: admission, KV blocks, warm-up and service time (:mod:`sim.behaviour` holds the
  built-in model mix and the accuracy model; :mod:`sim.clock` the real and virtual clocks).
- :mod:`sim.faults` and :mod:`sim.lifecycle`: what can go wrong, when it started and ended, and
  what it does to the process (crash, hang, restart, frozen metrics).
- :mod:`sim.exposition`: ``/metrics`` under vLLM's names, and the admin overrides.
- :mod:`sim.fleet`: ``start_fleet(config)`` and ``run_fleet(config)`` for every configured instance.
- :mod:`sim.corpus` (data in :mod:`sim.corpus_data`): queries with ground truth, answers, grading.
- :mod:`sim.traffic`, :mod:`sim.rates`, :mod:`sim.workload`: open-loop traffic through the gateway.
- :mod:`sim.traffic_report`: the summary of a traffic run (volume, errors, latency, accuracy, feedback).
- :mod:`sim.scenarios`, :mod:`sim.drill_run`, :mod:`sim.drill`: drill files, running them, reports.
- :mod:`sim.day`: a drill scenario played day after day against a running gateway (the demo's day).

``sim`` imports only :mod:`schemas` from RouteLens and is never imported by ``router_core``.
"""
