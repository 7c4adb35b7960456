"""One decision trace as an OpenTelemetry span tree.

::

    chat <requested model>        SERVER   the request: GenAI conventions, outcome, tokens, trace_url
    ├── routelens.decide          INTERNAL openinference.span.kind DECISION: rule, intent, arm, choice,
    │                                      margin, mode, fallback; an event per step and per eliminated
    │                                      candidate (constraint, metric, value, threshold)
    └── routelens.attempt <inst>  CLIENT   one per upstream attempt, with its outcome

The ids are the trace's own: the request span's id and each attempt's span id are the ones the
gateway recorded and sent upstream in ``traceparent``, so the instance's spans hang under the
attempt that called it and the client's span is the request span's parent. A trace without
them (from another router, through the intake) gets ids derived from its request id, so
exporting it twice gives the same spans. The decision span's id is derived from the request's.

Times: the trace stores when the decision began (``ts``), how long it took and each attempt's
length, not when each attempt began; the request span runs ``outcome.total_ms`` from ``ts``,
the decision span its ``latency_ms``, and the attempts follow the decision one after another.

Built from the stored JSON (already validated by the pipeline), not from models: this runs for
every exported request on the exporter's thread. Nothing here reads the query: only its hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ingest.otel import keys

__all__ = ["SpanBuilder", "ids_of", "trace_url"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_EVENT_STEPS = {"policy", "filter", "score", "pick", "fallback"}  # analyse and attempts have spans or attributes
Attrs = dict[str, Any]


def _derived(*parts: str, size: int) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=size).hexdigest()


def ids_of(trace: Mapping[str, Any]) -> tuple[str, str]:
    """``(trace id, request span id)`` of a stored trace: its own, or derived from its request id."""
    trace_id = trace.get("otel_trace_id") or _derived("trace", trace["request_id"], size=16)
    span_id = trace.get("otel_span_id") or _derived("span", trace["request_id"], size=8)
    return trace_id, span_id


def trace_url(public_url: str, request_id: str) -> str:
    """The app's "Why this model" page of one request."""
    return f"{public_url.rstrip('/')}/trace?request_id={quote(request_id, safe='')}"


def _ns(ts: str) -> int:
    return ((datetime.fromisoformat(ts) - _EPOCH) // _US) * 1000


def _put(attrs: Attrs, key: str, value: Any) -> None:
    if value is not None:
        attrs[key] = value


def _ctx(trace_id: str, span_id: str, *, remote: bool = False) -> SpanContext:
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=remote, trace_flags=_SAMPLED)


def margin_of(candidates: list[dict[str, Any]]) -> float | None:
    """The winner's total score over the runner-up's (None with fewer than two ranked candidates)."""
    totals = sorted((c["total"] for c in candidates if c.get("rank") is not None and c.get("total") is not None),
                    reverse=True)
    return totals[0] - totals[1] if len(totals) > 1 else None


class SpanBuilder:
    """Turns stored traces into spans for one process (its resource and instrumentation scope).

    Args:
        resource: The process's resource (service.name and the rest).
        scope: The instrumentation scope named on every span.
        public_url: The app's address; each request and decision span links to its page (None: no link).
    """

    def __init__(self, resource: Resource, scope: InstrumentationScope, public_url: str | None = None) -> None:
        self._resource = resource
        self._scope = scope
        self._public_url = public_url

    def spans(self, trace: Mapping[str, Any]) -> list[ReadableSpan]:
        """The span tree of one stored trace: the request, the decision, then the attempts in order."""
        trace_id, request_span = ids_of(trace)
        start = _ns(trace["ts"])
        outcome = trace["outcome"]
        decision_end = start + int(trace["latency_ms"] * 1e6)
        end = max(start + int(outcome["total_ms"] * 1e6), decision_end)
        parent_id = trace.get("otel_parent_span_id")
        request = self._span(
            f"chat {trace['features']['requested_model']}", _ctx(trace_id, request_span),
            None if parent_id is None else _ctx(trace_id, parent_id, remote=True), SpanKind.SERVER,
            self._request_attrs(trace), (), start, end, outcome["status"] != "ok", outcome.get("error_class"))
        decision = self._span(
            keys.DECISION_SPAN, _ctx(trace_id, _derived("decision", request_span, size=8)),
            request.context, SpanKind.INTERNAL, self._decision_attrs(trace), self._events(trace, start),
            start, decision_end, False, None)
        out = [request, decision]
        t = decision_end
        for attempt in trace["attempts"]:
            span_id = attempt.get("span_id") or _derived("attempt", request_span, str(attempt["seq"]), size=8)
            t_end = t + int(attempt["latency_ms"] * 1e6)
            out.append(self._span(
                f"{keys.ATTEMPT_SPAN} {attempt['instance']}", _ctx(trace_id, span_id), request.context,
                SpanKind.CLIENT, _attempt_attrs(attempt), (), t, t_end, attempt["status"] != "ok",
                attempt.get("error_class")))
            t = t_end
        return out

    def _span(self, name: str, ctx: SpanContext, parent: SpanContext | None, kind: SpanKind, attrs: Attrs,
              events: tuple[Event, ...] | list[Event], start: int, end: int, failed: bool,
              error: str | None) -> ReadableSpan:
        status = Status(StatusCode.ERROR, error or "") if failed else Status(StatusCode.UNSET)
        return ReadableSpan(name=name, context=ctx, parent=parent, resource=self._resource, attributes=attrs,
                            events=events, kind=kind, status=status, start_time=start, end_time=end,
                            instrumentation_scope=self._scope)

    def _link(self, attrs: Attrs, request_id: str) -> None:
        if self._public_url is not None:
            attrs[keys.TRACE_URL] = trace_url(self._public_url, request_id)

    def _request_attrs(self, trace: Mapping[str, Any]) -> Attrs:
        features, outcome = trace["features"], trace["outcome"]
        attrs: Attrs = {
            keys.GEN_AI_OPERATION: "chat", keys.GEN_AI_REQUEST_MODEL: features["requested_model"],
            keys.SPAN_KIND: "LLM", keys.REQUEST_ID: trace["request_id"], keys.QUERY_HASH: trace["query_hash"],
            keys.OUTCOME: outcome["status"], keys.HTTP_STATUS: outcome["http_status"],
        }
        _put(attrs, keys.GEN_AI_RESPONSE_MODEL, trace.get("selected_model"))
        _put(attrs, keys.LLM_MODEL, trace.get("selected_model"))
        _put(attrs, keys.GEN_AI_REQUEST_MAX_TOKENS, features.get("max_tokens"))
        prompt, completion = outcome.get("prompt_tokens"), outcome.get("completion_tokens")
        _put(attrs, keys.GEN_AI_INPUT_TOKENS, prompt)
        _put(attrs, keys.GEN_AI_OUTPUT_TOKENS, completion)
        _put(attrs, keys.LLM_PROMPT_TOKENS, prompt)
        _put(attrs, keys.LLM_COMPLETION_TOKENS, completion)
        if prompt is not None and completion is not None:
            attrs[keys.LLM_TOTAL_TOKENS] = prompt + completion
        _put(attrs, keys.ERROR_TYPE, outcome.get("error_class"))
        _put(attrs, keys.COST, outcome.get("cost"))
        _put(attrs, keys.TTFT_MS, outcome.get("ttft_ms"))
        self._link(attrs, trace["request_id"])
        return attrs

    def _decision_attrs(self, trace: Mapping[str, Any]) -> Attrs:
        candidates = trace["candidates"]
        attrs: Attrs = {
            keys.SPAN_KIND: "DECISION", keys.ROUTER_VERSION: trace["router_version"],
            keys.POLICY_HASH: trace["policy_hash"], keys.MODE: trace["mode"],
            keys.FALLBACK: trace["fallback_triggered"], keys.REQUEST_ID: trace["request_id"],
            keys.QUERY_HASH: trace["query_hash"], keys.CANDIDATES: len(candidates),
            keys.FEASIBLE: sum(1 for c in candidates if c["feasible"]), keys.DECISION_MS: trace["latency_ms"],
        }
        for key, field in ((keys.RULE, "rule"), (keys.INTENT, "intent"), (keys.INTENT_CONFIDENCE, "intent_confidence"),
                           (keys.ARM, "experiment_arm"), (keys.SELECTED_INSTANCE, "selected_instance"),
                           (keys.SELECTED_MODEL, "selected_model"), (keys.FALLBACK_REASON, "fallback_reason"),
                           (keys.SELECTION_PROBABILITY, "selection_probability")):
            _put(attrs, key, trace.get(field))
        _put(attrs, keys.MARGIN, margin_of(candidates))
        self._link(attrs, trace["request_id"])
        return attrs

    @staticmethod
    def _events(trace: Mapping[str, Any], start: int) -> list[Event]:
        """An event per policy, filter, scorer, pick or fallback step, then per eliminated candidate violation."""
        events: list[Event] = []
        t = start
        for step in trace["decision_trace"]:
            if step.get("duration_us") is not None:
                t += int(step["duration_us"] * 1000)
            if step["kind"] not in _EVENT_STEPS:
                continue
            attrs: Attrs = {keys.STEP_SEQ: step["seq"], keys.STEP_KIND: step["kind"]}
            _put(attrs, keys.STEP_PLUGIN, step.get("plugin"))
            _put(attrs, keys.STEP_VALUE, step.get("value"))
            _put(attrs, keys.STEP_DURATION_US, step.get("duration_us"))
            if step.get("reason"):
                attrs[keys.STEP_REASON] = step["reason"]
            if step.get("instances"):
                attrs[keys.STEP_KEPT] = list(step["instances"])
            if step.get("rejected"):
                attrs[keys.STEP_REJECTED] = list(step["rejected"])
            events.append(Event(step["step"], attrs, timestamp=t))
        end = max(t, start)
        for cand in trace["candidates"]:
            if cand["feasible"]:
                continue
            violations = [v for v in cand.get("violations") or () if v.get("severity", "hard") == "hard"]
            base: Attrs = {keys.CANDIDATE_INSTANCE: cand["instance"], keys.CANDIDATE_MODEL: cand["model"]}
            if not violations:
                events.append(Event(keys.ELIMINATED, {**base, keys.REASON: "not feasible"}, timestamp=end))
            for v in violations:
                attrs = {**base, keys.CONSTRAINT: v["constraint"], keys.REASON: v["reason"], keys.METRIC: v["metric"],
                         keys.OP: v["op"], keys.THRESHOLD: v["threshold"], keys.SEVERITY: v.get("severity", "hard")}
                _put(attrs, keys.VALUE, v.get("value"))
                events.append(Event(keys.ELIMINATED, attrs, timestamp=end))
        return events


def _attempt_attrs(attempt: Mapping[str, Any]) -> Attrs:
    attrs: Attrs = {keys.ATTEMPT_SEQ: attempt["seq"], keys.INSTANCE: attempt["instance"],
                    keys.GEN_AI_REQUEST_MODEL: attempt["model"], keys.ATTEMPT_STATUS: attempt["status"],
                    keys.LATENCY_MS: attempt["latency_ms"]}
    _put(attrs, keys.HTTP_STATUS, attempt.get("http_status"))
    _put(attrs, keys.ERROR_TYPE, attempt.get("error_class"))
    return attrs
