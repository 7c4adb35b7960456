"""What the parts of the prober hand each other: a probe target and one check's judgement."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.common import ProbeVerdict

__all__ = ["Judgement", "Target"]


@dataclass(frozen=True, slots=True)
class Target:
    """One instance to probe, straight (never through the router).

    Attributes:
        instance: The fleet's instance id.
        model: The fleet's model name (``InstanceSpec.model``): what results are recorded under.
        url: The instance's base URL (``POST {url}/v1/chat/completions``).
        api_key: The instance's upstream key (``fleet.instances[].api_key_env``), if any.
        upstream_model: The model name the instance itself knows (``InstanceSpec.upstream_model``),
            if it differs: what a probe request sends.
    """

    instance: str
    model: str
    url: str
    api_key: str | None = None
    upstream_model: str | None = None

    @property
    def sent_model(self) -> str:
        """The model name a probe request sends: ``upstream_model``, else ``model``."""
        return self.upstream_model or self.model


@dataclass(frozen=True, slots=True)
class Judgement:
    """What one check concluded about one probe request (or round), before hysteresis.

    ``value`` is what was measured and ``threshold`` the bound it was judged against; ``reason``
    says in words what was wrong (empty when ``ok``); ``error_class`` names the failure
    (``timeout``, ``connect``, ``http_status``, ``not_json``, ``schema``, ``encoding``, ``empty``,
    ``garbled``, ``too_large``, ``off_baseline``, ``trend``, ``drift``).
    """

    verdict: ProbeVerdict
    value: float | None = None
    threshold: float | None = None
    reason: str = ""
    error_class: str | None = None
    baseline: float | None = None
    reference: str | None = None
    latency_ms: float | None = None
