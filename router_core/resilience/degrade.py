"""Degraded modes (seed 000, 优雅降级): the request changes the gateway's degrade stage may make.

``shed_features`` drops optional, costly parameters (``logprobs``, ``top_logprobs``, ``n > 1``,
``best_of``, beam search); ``cap_max_tokens`` lowers ``max_tokens`` as the candidates' load rises
(a shorter answer fits more context windows and frees KV cache sooner). The stage that orders
them, with the answer cache and the responder, is :mod:`router_core.gateway.stages.degrade`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.config.economics import DegradedSettings
from schemas.fleet import InstanceSnapshot

__all__ = ["OPTIONAL_FEATURES", "cap_max_tokens", "load_of", "max_tokens_cap", "shed_features"]

OPTIONAL_FEATURES = ("logprobs", "top_logprobs", "best_of", "use_beam_search", "length_penalty", "early_stopping")


def shed_features(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``body`` without its optional features (``n`` back to 1), and the names shed."""
    shed = [k for k in OPTIONAL_FEATURES if body.get(k) not in (None, False, 0)]
    if isinstance(n := body.get("n"), int) and n > 1:
        shed.append("n")
    out = {k: v for k, v in body.items() if k not in shed}
    return out, shed


def load_of(state: Mapping[str, InstanceSnapshot], ids: list[str]) -> float:
    """The candidates' mean KV-cache usage (0 with no data): how loaded the fleet is for this request."""
    loads = [u for i in ids if (s := state.get(i)) is not None and (u := s.kv_cache_usage) is not None]
    return sum(loads) / len(loads) if loads else 0.0


def max_tokens_cap(settings: DegradedSettings, load: float) -> int:
    """From ``max_tokens_ceiling`` at no load down to ``max_tokens_floor`` at full load, linearly."""
    x = min(1.0, max(0.0, load))
    return int(settings.max_tokens_ceiling - (settings.max_tokens_ceiling - settings.max_tokens_floor) * x)


def cap_max_tokens(body: dict[str, Any], cap: int) -> tuple[dict[str, Any], bool]:
    """``body`` with ``max_tokens`` (and ``max_completion_tokens``) at most ``cap``; whether it changed."""
    keys = [k for k in ("max_tokens", "max_completion_tokens") if k in body] or ["max_tokens"]
    if all(isinstance(body.get(k), int) and body[k] <= cap for k in keys):
        return body, False
    return {**body, **{k: cap for k in keys}}, True
