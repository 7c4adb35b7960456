"""Field mappings that turn traces from other routers into :class:`DecisionTrace` records.

``routelens`` (the default) takes records as they are: they must be DecisionTrace JSON, unknown
fields are refused. ``generic`` maps the flat log lines most routers and proxies write; the first
source field found wins, and fields it does not know are ignored:

=========================  ==========================================================================
DecisionTrace field        source fields (first present), and the rule applied
=========================  ==========================================================================
request_id                 request_id, id, requestId, trace_id
ts                         ts, timestamp, time, created_at, created (ISO 8601; epoch s or ms)
router_version             router_version, router, version  (default ``external``)
policy_hash                policy_hash, policy, config_hash  (default ``external``)
experiment_arm             experiment_arm, arm, variant
query_hash                 query_hash, prompt_hash; else computed from query, prompt or the last user
                           message of messages[] (role ``user``; text parts of a multimodal content list;
                           malformed content counts as empty) by :mod:`schemas.chat_text` and
                           :func:`schemas.hashing.query_hash`, as the gateway does; the text is then dropped
rule                       rule, route, route_name, category
intent                     intent, task, classification
features.requested_model   requested_model, model_requested, model_alias  (default ``auto``)
features.n_messages        n_messages, or len(messages)
features.input_chars       input_chars, or the length of the text that was hashed
selected_model             selected_model, model, routed_model, target_model
selected_instance          selected_instance, instance, endpoint, deployment, api_base
fallback_triggered         fallback_triggered, fallback, is_fallback
fallback_reason            fallback_reason
latency_ms                 latency_ms of the routing decision: routing_latency_ms, decision_ms (default 0)
outcome.status             outcome_status, status: ``ok``/``success``/2xx -> ok, anything else -> error
outcome.http_status        http_status, status_code (default 200 for ok, 500 otherwise)
outcome.total_ms           total_ms, duration_ms, response_time_ms, elapsed_ms  (required)
outcome.cost               cost, response_cost, spend
outcome.prompt_tokens      prompt_tokens, usage.prompt_tokens, input_tokens
outcome.completion_tokens  completion_tokens, usage.completion_tokens, output_tokens
outcome.ttft_ms            ttft_ms, time_to_first_token_ms
=========================  ==========================================================================

A custom mapping is a JSON object ``{"target.field": ["source", "other.source"], ...}`` for the
same targets; it replaces the source lists of the targets it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from schemas.chat_text import MalformedContent, last_user_text
from schemas.hashing import query_hash

__all__ = ["GENERIC", "MAPPINGS", "map_record"]

GENERIC: dict[str, list[str]] = {
    "request_id": ["request_id", "id", "requestId", "trace_id"],
    "ts": ["ts", "timestamp", "time", "created_at", "created"],
    "router_version": ["router_version", "router", "version"],
    "policy_hash": ["policy_hash", "policy", "config_hash"],
    "experiment_arm": ["experiment_arm", "arm", "variant"],
    "query_hash": ["query_hash", "prompt_hash"],
    "rule": ["rule", "route", "route_name", "category"],
    "intent": ["intent", "task", "classification"],
    "features.requested_model": ["requested_model", "model_requested", "model_alias"],
    "features.n_messages": ["n_messages"],
    "features.input_chars": ["input_chars"],
    "selected_model": ["selected_model", "model", "routed_model", "target_model"],
    "selected_instance": ["selected_instance", "instance", "endpoint", "deployment", "api_base"],
    "fallback_triggered": ["fallback_triggered", "fallback", "is_fallback"],
    "fallback_reason": ["fallback_reason"],
    "latency_ms": ["routing_latency_ms", "decision_ms"],
    "outcome.status": ["outcome_status", "status"],
    "outcome.http_status": ["http_status", "status_code"],
    "outcome.total_ms": ["total_ms", "duration_ms", "response_time_ms", "elapsed_ms"],
    "outcome.cost": ["cost", "response_cost", "spend"],
    "outcome.prompt_tokens": ["prompt_tokens", "usage.prompt_tokens", "input_tokens"],
    "outcome.completion_tokens": ["completion_tokens", "usage.completion_tokens", "output_tokens"],
    "outcome.ttft_ms": ["ttft_ms", "time_to_first_token_ms"],
}
_TEXT_FIELDS = ("query", "prompt", "messages", "input")
MAPPINGS: dict[str, dict[str, list[str]] | None] = {"routelens": None, "generic": GENERIC}


def _lookup(record: Mapping[str, Any], path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _query_text(messages: list[Any]) -> str:
    """The text of the last user message (:func:`schemas.chat_text.last_user_text`); malformed content is empty."""
    try:
        return last_user_text(messages)[0]
    except MalformedContent:
        return ""


def _text_of(record: Mapping[str, Any]) -> str | None:
    """The query text, as the gateway defines it for OpenAI-style messages: the last user message's."""
    for name in _TEXT_FIELDS:
        value = record.get(name)
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return _query_text(value)
    return None


def _timestamp(value: Any) -> Any:
    """Epoch seconds or milliseconds as ISO 8601; anything else, and an epoch no date holds, as it is.

    The model then refuses what is no time, naming ``ts`` (a mapping never raises for a value).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    try:
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, UTC).isoformat()
    except (OverflowError, ValueError, OSError):  # beyond time_t, year 9999, or nan
        return value


def _status(value: Any) -> str:
    if isinstance(value, int):
        return "ok" if 200 <= value < 400 else "error"
    return "ok" if str(value).lower() in ("ok", "success", "succeeded", "200") else "error"


def _set(out: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = out
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def map_record(
    record: Mapping[str, Any], mapping: Mapping[str, list[str]], hash_key: str | None = None
) -> dict[str, Any]:
    """Map one foreign record; return the DecisionTrace-shaped dict (fields no mapping names are ignored).

    The raw text of a query, if the record carries one, is hashed and never copied.
    """
    out: dict[str, Any] = {}
    for target, sources in mapping.items():
        for source in sources:
            if any(part in _TEXT_FIELDS for part in source.split(".")):
                continue  # query text is only ever hashed, whatever a custom mapping asks for (nested too)
            value = _lookup(record, source)
            if value is not None:
                _set(out, target, value)
                break
    text = _text_of(record)
    if "query_hash" not in out and text is not None:
        out["query_hash"] = query_hash(text, hash_key)
    feats = out.setdefault("features", {})
    feats.setdefault("requested_model", "auto")
    messages = record.get("messages")
    feats.setdefault("n_messages", len(messages) if isinstance(messages, list) else 0)
    feats.setdefault("input_chars", len(text) if text is not None else 0)
    feats.setdefault("est_input_tokens", 0)
    out.setdefault("router_version", "external")
    out.setdefault("policy_hash", "external")
    out.setdefault("latency_ms", 0.0)
    if "ts" in out:
        out["ts"] = _timestamp(out["ts"])
    outcome = out.setdefault("outcome", {})
    outcome["status"] = _status(outcome.get("status", outcome.get("http_status", "ok")))
    outcome.setdefault("http_status", 200 if outcome["status"] == "ok" else 500)
    return out
