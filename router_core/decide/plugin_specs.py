"""Today's configuration sections, read as the plugin specs they stand for.

``router.plugins`` names the pipeline explicitly; without it, the sections a user already writes
(``scrape.stale_after_s``, ``routing.attachments.accept``, ``router.zones``, ``router.min_versions``,
``constraints``, ``scoring``, ``router.picker``) derive the same list of :class:`schemas.config.PluginSpec`,
so one builder (:func:`router_core.decide.policy.build_policy`) serves both.
"""

from __future__ import annotations

from schemas.config import PluginSpec, RouteLensConfig

__all__ = ["PICKER_TYPES", "SCORER_TYPES", "specs_from_sections"]

# score term (the scorer's default name) -> plugin type
SCORER_TYPES: dict[str, str] = {
    "mem": "kv-cache-scorer",
    "queue": "queue-depth-scorer",
    "warmup": "warmup-scorer",
    "error": "error-rate-scorer",
    "quality": "quality-scorer",
    "latency": "latency-scorer",
    "cost": "cost-scorer",
    "balance": "balance-scorer",
}
# router.picker -> plugin type
PICKER_TYPES: dict[str, str] = {"max": "max-score-picker", "p2c": "p2c-picker", "softmax": "softmax-picker"}


def specs_from_sections(config: RouteLensConfig) -> list[PluginSpec]:
    """Return the plugin specs the configuration's sections describe, in pipeline order.

    Scorers come in the order of the preset's weights (overrides after), then the terms no weight
    names, unweighted: they count only when a time-of-day profile gives them a weight.
    """
    router, scoring = config.router, config.scoring
    specs = [PluginSpec(type="freshness-filter", parameters={"max_age_s": config.scrape.stale_after_s}),
             PluginSpec(type="context-window-filter")]
    if config.routing.attachments.accept:
        specs.append(PluginSpec(type="attachment-filter", parameters={"accept": config.routing.attachments.accept}))
    if router.zones:
        specs.append(PluginSpec(type="zone-filter", parameters={"zones": router.zones}))
    if router.min_versions:
        specs.append(PluginSpec(type="version-filter", parameters={"min_versions": router.min_versions}))
    specs += [PluginSpec(type="constraint-filter", name=c.name, parameters=c.model_dump(exclude={"name"}))
              for c in config.constraints]
    if config.probes.enabled or config.probes.follow_url:
        specs.append(PluginSpec(type="probe-filter"))
    specs.append(PluginSpec(type="breaker-filter"))  # open breakers (router_core.resilience.breakers)
    params = {"queue": {"queue_norm": scoring.queue_norm}, "latency": {"latency_slo_ms": scoring.latency_slo_ms}}
    weights = scoring.base_weights()
    for term in [*weights, *(t for t in SCORER_TYPES if t not in weights)]:
        specs.append(PluginSpec(type=SCORER_TYPES[term], weight=weights.get(term), parameters=params.get(term, {})))
    picker = {"temperature": router.softmax_temperature} if router.picker == "softmax" else {}
    specs.append(PluginSpec(type=PICKER_TYPES[router.picker], parameters=picker))
    return specs
