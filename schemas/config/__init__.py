"""The ``routelens.yaml`` configuration, validated at load time: one module per section.

Layers, each importing only those above it (``tests/test_import_cycles.py`` holds it)::

    decision      router, constraints, scoring, models: the sections a policy may replace
    storage  sim  probes  shared (and throttles)  resilience  economics  otel
    attachments  intents  keywords  ->  routing
    experiments   (an arm's inline policy is the decision sections)
    routelens     RouteLensConfig: gateway, fleet, scrape, app, and every section above

The names below are the ones other rooms import from ``schemas.config``; a section's own models
are imported from its module (``from schemas.config.storage import SpoolSettings``).
"""

from schemas.config.decision import (
    SCORING_PRESETS,
    TERM_NAMES,
    ConstraintRule,
    ConstraintSpec,
    ModelProfile,
    PluginSpec,
    RouterSettings,
    ScoringProfile,
    ScoringSettings,
)
from schemas.config.routelens import (
    AppSettings,
    FleetSettings,
    GatewaySettings,
    HealthBand,
    HealthThresholds,
    RouteLensConfig,
    ScrapeSettings,
)
from schemas.config.sim import SimModelProfile, SimSettings
from schemas.config.storage import StorageSettings

__all__ = [
    "SCORING_PRESETS",
    "TERM_NAMES",
    "AppSettings",
    "ConstraintRule",
    "ConstraintSpec",
    "FleetSettings",
    "GatewaySettings",
    "HealthBand",
    "HealthThresholds",
    "ModelProfile",
    "PluginSpec",
    "RouteLensConfig",
    "RouterSettings",
    "ScoringProfile",
    "ScoringSettings",
    "ScrapeSettings",
    "SimModelProfile",
    "SimSettings",
    "StorageSettings",
]
