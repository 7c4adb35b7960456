"""Span and attribute names of the exported span tree, in one place.

``gen_ai.*`` are the OpenTelemetry GenAI semantic conventions, ``openinference.*``
OpenInference's (what Phoenix and Arize read), ``routelens.*`` our own. Each value is said once,
on one span: the request id and query hash on the request span. A latency is also an attribute
beside its span's times, as a number a backend can filter and aggregate on: the decision's
``routelens.decision_ms``, an upstream attempt's ``routelens.attempt.latency_ms``.
"""

from __future__ import annotations

__all__: list[str] = []  # names are used as ``keys.NAME``

# OpenTelemetry GenAI and general semantic conventions
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
HTTP_STATUS = "http.response.status_code"
ERROR_TYPE = "error.type"

# OpenInference (Phoenix reads the GenAI attributes above as its own llm.* ones)
SPAN_KIND = "openinference.span.kind"

# RouteLens: the request
REQUEST_ID = "routelens.request_id"
QUERY_HASH = "routelens.query_hash"
TRACE_URL = "routelens.trace_url"
OUTCOME = "routelens.outcome"
COST = "routelens.cost"
TTFT_MS = "routelens.ttft_ms"

# RouteLens: the decision
RULE = "routelens.rule"
THROTTLED = "routelens.throttled"  # what the rule's throttle did: chain, reject or wait (absent: it had a token)
THROTTLE_WAITED_S = "routelens.throttle.waited_s"  # seconds queued for a token (absent: did not queue)
INTENT = "routelens.intent"
INTENT_CONFIDENCE = "routelens.intent_confidence"
ARM = "routelens.arm"
ROUTER_VERSION = "routelens.router_version"
POLICY_HASH = "routelens.policy_hash"
SELECTED_INSTANCE = "routelens.selected_instance"
SELECTED_MODEL = "routelens.selected_model"
MARGIN = "routelens.margin"
MODE = "routelens.mode"
FALLBACK = "routelens.fallback"
FALLBACK_REASON = "routelens.fallback_reason"
SELECTION_PROBABILITY = "routelens.selection_probability"
CANDIDATES = "routelens.candidates"
FEASIBLE = "routelens.feasible"
DECISION_MS = "routelens.decision_ms"

# RouteLens: a step's event
STEP_KIND = "routelens.step.kind"
STEP_PLUGIN = "routelens.step.plugin"
STEP_VALUE = "routelens.step.value"
STEP_REASON = "routelens.step.reason"
STEP_KEPT = "routelens.step.kept"
STEP_REJECTED = "routelens.step.rejected"

# RouteLens: an eliminated candidate's event
ELIMINATED = "eliminated"  # the event's name
CANDIDATE_INSTANCE = "routelens.candidate.instance"
CANDIDATE_MODEL = "routelens.candidate.model"
CONSTRAINT = "routelens.constraint"
REASON = "routelens.reason"
METRIC = "routelens.metric"
VALUE = "routelens.value"
THRESHOLD = "routelens.threshold"
OP = "routelens.op"
SEVERITY = "routelens.severity"

# RouteLens: an attempt
ATTEMPT_SEQ = "routelens.attempt.seq"
ATTEMPT_STATUS = "routelens.attempt.status"
ATTEMPT_LATENCY_MS = "routelens.attempt.latency_ms"  # the attempt's upstream latency (its span's length)
INSTANCE = "routelens.instance"

# span names
DECISION_SPAN = "routelens.decide"
ATTEMPT_SPAN = "routelens.attempt"
