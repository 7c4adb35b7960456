"""One decision trace as an OpenTelemetry span tree.

::

    chat <requested model>        SERVER   the request: GenAI conventions, outcome, tokens, trace_url
    ├── routelens.decide          INTERNAL openinference.span.kind DECISION: rule, its throttle's verdict
    │                                      and wait, intent, arm, choice, margin, mode, fallback; an event
    │                                      per step and per eliminated candidate (constraint, metric,
    │                                      value, threshold)
    └── routelens.attempt <inst>  CLIENT   one per upstream attempt, with its outcome

The ids are the trace's own: the request span's id and each attempt's span id are the ones the
gateway recorded and sent upstream in ``traceparent``, so the instance's spans hang under the
attempt that called it and the client's span is the request span's parent. A trace without
them (from another router, through the intake) gets ids derived from its request id, so
exporting it twice gives the same spans. The decision span's id is derived from the request's.
A trace that carries the client's W3C ``tracestate`` (``otel_trace_state``: what the gateway
passed on upstream with each attempt's ``traceparent``) gives it to every span as its
``trace_state``, as an SDK's spans inherit their parent context's.

Times: the trace stores when the decision began (``ts``), how long it took, and each attempt's
start (``start_ms`` after ``ts``) and length; the request span runs ``outcome.total_ms`` from
``ts``, the decision span its ``latency_ms``, and each attempt span from its start (a hedge's twin
overlaps the attempt it races). An attempt without a start (an older trace) follows the one
before it, the first the decision.

Built from the stored JSON, not from models: this runs for every exported request on the
exporter's thread. The spans are plain values (:class:`PlainSpan`), which :mod:`ingest.otel.wire`
encodes as OTLP protobuf and :func:`to_readable` turns into the SDK's ``ReadableSpan`` (for an SDK
exporter, and to check the two agree). Where the C extension is built, the exporter does not call
:meth:`SpanBuilder.spans` for a trace of the contract's shape: ``encode_traces``
(``ingest/otel/_otlp_traces.c``) writes the same spans' bytes from the JSON directly, and hands
any other shape back to it. This module is the reference it is tested against: a change to the
span tree here needs the same change there (``tests/ingest/otel/test_traces_fast.py`` fails until
both agree). Nothing here reads the query: only its hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, NamedTuple
from urllib.parse import quote

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from ingest.otel import keys

__all__ = ["PlainEvent", "PlainSpan", "SpanBuilder", "ids_of", "to_readable", "trace_url"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_EVENT_STEPS = {"policy", "filter", "score", "pick", "fallback"}  # analyse and attempts have spans or attributes
Attrs = dict[str, Any]
_STEP_ATTRS: dict[tuple[Any, ...], Attrs] = {}  # a step's identity -> its event's attributes (shared)
_STEP_ATTRS_MAX = 16_384


class PlainEvent(NamedTuple):
    """A span event: its name, time (ns since the epoch) and attributes (``shared``: a dict many events share)."""

    name: str
    time_ns: int
    attributes: Attrs
    shared: bool = False


class PlainSpan(NamedTuple):
    """One span as plain values; ids in lower-case hex."""

    trace_id: str
    span_id: str
    parent_id: str | None
    parent_remote: bool
    name: str
    kind: SpanKind
    start_ns: int
    end_ns: int
    attributes: Attrs
    events: list[PlainEvent]
    error: str | None  # None: status unset; a string (maybe empty): ERROR with that message
    trace_state: str | None = None  # the W3C tracestate the request came with (None or empty: none)


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


def _ctx(trace_id: str, span_id: str, *, remote: bool = False, state: str | None = None) -> SpanContext:
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=remote, trace_flags=_SAMPLED,
                       trace_state=TraceState.from_header([state]) if state else None)


def margin_of(candidates: list[dict[str, Any]]) -> float | None:
    """The winner's total score over the runner-up's (None with fewer than two ranked candidates)."""
    totals = sorted((c["total"] for c in candidates if c.get("rank") is not None and c.get("total") is not None),
                    reverse=True)
    return totals[0] - totals[1] if len(totals) > 1 else None


class SpanBuilder:
    """Turns stored traces into span trees.

    Args:
        public_url: The app's address; each request and decision span links to its page (None: no link).
    """

    def __init__(self, public_url: str | None = None) -> None:
        self._public_url = public_url

    @property
    def link(self) -> Callable[[str], str] | None:
        """A request id's link to its page in the app (None: no ``public_url``, no link)."""
        url = self._public_url
        return None if url is None else partial(trace_url, url)

    @staticmethod
    def heads(trace: Mapping[str, Any]) -> tuple[str, str, str, int]:
        """A trace's ids (its own or derived: the trace's, the request span's, the decision span's) and start (ns).

        What the C path (:data:`ingest.otel.wire.encode_traces`) asks of Python, with
        :attr:`link`, :meth:`attempt_id`, and :meth:`spans` for a trace of a shape it does not know.
        """
        trace_id, request_span = ids_of(trace)
        return trace_id, request_span, _derived("decision", request_span, size=8), _ns(trace["ts"])

    @staticmethod
    def attempt_id(request_span: str, seq: Any) -> str:
        """The span id of an attempt recorded without one (a trace from before trace context, or the intake)."""
        return _derived("attempt", request_span, str(seq), size=8)

    def spans(self, trace: Mapping[str, Any]) -> list[PlainSpan]:
        """The span tree of one stored trace: the request, the decision, then the attempts in order."""
        trace_id, request_span, decision_span, start = self.heads(trace)
        outcome = trace["outcome"]
        decision_end = start + int(trace["latency_ms"] * 1e6)
        end = max(start + int(outcome["total_ms"] * 1e6), decision_end)
        failed = outcome["status"] != "ok"
        state = trace.get("otel_trace_state")
        out = [
            PlainSpan(trace_id, request_span, trace.get("otel_parent_span_id"), True,
                      f"chat {trace['features']['requested_model']}", SpanKind.SERVER, start, end,
                      self._request_attrs(trace), [], (outcome.get("error_class") or "") if failed else None, state),
            PlainSpan(trace_id, decision_span, request_span, False, keys.DECISION_SPAN,
                      SpanKind.INTERNAL, start, decision_end, self._decision_attrs(trace), self._events(trace, start),
                      None, state),
        ]
        t = decision_end
        for attempt in trace["attempts"]:
            span_id = attempt.get("span_id") or self.attempt_id(request_span, attempt["seq"])
            sent = attempt.get("start_ms")
            t = t if sent is None else start + int(sent * 1e6)
            t_end = t + int(attempt["latency_ms"] * 1e6)
            out.append(PlainSpan(trace_id, span_id, request_span, False, f"{keys.ATTEMPT_SPAN} {attempt['instance']}",
                                 SpanKind.CLIENT, t, t_end, _attempt_attrs(attempt), [],
                                 (attempt.get("error_class") or "") if attempt["status"] != "ok" else None, state))
            t = t_end
        return out

    def _link(self, attrs: Attrs, request_id: str) -> None:
        if self._public_url is not None:
            attrs[keys.TRACE_URL] = trace_url(self._public_url, request_id)

    def _request_attrs(self, trace: Mapping[str, Any]) -> Attrs:
        features, outcome = trace["features"], trace["outcome"]
        attrs: Attrs = {
            keys.GEN_AI_OPERATION: "chat", keys.GEN_AI_REQUEST_MODEL: features["requested_model"],
            keys.REQUEST_ID: trace["request_id"], keys.QUERY_HASH: trace["query_hash"],
            keys.OUTCOME: outcome["status"], keys.HTTP_STATUS: outcome["http_status"],
        }
        _put(attrs, keys.GEN_AI_RESPONSE_MODEL, trace.get("selected_model"))
        _put(attrs, keys.GEN_AI_REQUEST_MAX_TOKENS, features.get("max_tokens"))
        prompt, completion = outcome.get("prompt_tokens"), outcome.get("completion_tokens")
        _put(attrs, keys.GEN_AI_INPUT_TOKENS, prompt)
        _put(attrs, keys.GEN_AI_OUTPUT_TOKENS, completion)
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
            keys.FALLBACK: trace["fallback_triggered"], keys.CANDIDATES: len(candidates),
            keys.FEASIBLE: sum(1 for c in candidates if c["feasible"]), keys.DECISION_MS: trace["latency_ms"],
        }
        for key, field in ((keys.RULE, "rule"), (keys.INTENT, "intent"), (keys.INTENT_CONFIDENCE, "intent_confidence"),
                           (keys.ARM, "experiment_arm"), (keys.SELECTED_INSTANCE, "selected_instance"),
                           (keys.SELECTED_MODEL, "selected_model"), (keys.FALLBACK_REASON, "fallback_reason"),
                           (keys.SELECTION_PROBABILITY, "selection_probability")):
            _put(attrs, key, trace.get(field))
        policy = trace.get("policy")
        if policy is not None:  # what the rule's throttle did, and how long the request queued for a token
            _put(attrs, keys.THROTTLED, policy.get("throttled"))
            _put(attrs, keys.THROTTLE_WAITED_S, policy.get("waited_s"))
        _put(attrs, keys.MARGIN, margin_of(candidates))
        self._link(attrs, trace["request_id"])
        return attrs

    @staticmethod
    def _events(trace: Mapping[str, Any], start: int) -> list[PlainEvent]:
        """An event per policy, filter, scorer, pick or fallback step, then per eliminated candidate violation."""
        events: list[PlainEvent] = []
        t = start
        for step in trace["decision_trace"]:
            if step.get("duration_us") is not None:
                t += int(step["duration_us"] * 1000)
            if step["kind"] in _EVENT_STEPS:
                events.append(PlainEvent(step["step"], t, _step_attrs(step), shared=True))
        end = max(t, start)
        for cand in trace["candidates"]:
            if cand["feasible"]:
                continue
            violations = [v for v in cand.get("violations") or () if v.get("severity", "hard") == "hard"]
            base: Attrs = {keys.CANDIDATE_INSTANCE: cand["instance"], keys.CANDIDATE_MODEL: cand["model"]}
            if not violations:
                events.append(PlainEvent(keys.ELIMINATED, end, {**base, keys.REASON: "not feasible"}))
            for v in violations:
                attrs = {**base, keys.CONSTRAINT: v["constraint"], keys.REASON: v["reason"], keys.METRIC: v["metric"],
                         keys.OP: v["op"], keys.THRESHOLD: v["threshold"], keys.SEVERITY: v.get("severity", "hard")}
                _put(attrs, keys.VALUE, v.get("value"))
                events.append(PlainEvent(keys.ELIMINATED, end, attrs))
        return events


def _step_attrs(step: Mapping[str, Any]) -> Attrs:
    """A step event's attributes: one shared dict per distinct step, never changed once made.

    Steps repeat from request to request (the same filters keeping the same instances, the same
    weights), so the dict is made once and :mod:`ingest.otel.wire` encodes it once (it keys its
    cache on the dict itself).
    """
    value = step.get("value")  # with its type: 1, 1.0 and True are equal keys, and encode apart
    sig = (step["kind"], step.get("plugin"), type(value), value, step.get("reason"),
           tuple(step.get("instances") or ()), tuple(step.get("rejected") or ()))
    found = _STEP_ATTRS.get(sig)
    if found is None:
        kind, plugin, _, value, reason, kept, rejected = sig
        found = {keys.STEP_KIND: kind}
        _put(found, keys.STEP_PLUGIN, plugin)
        _put(found, keys.STEP_VALUE, value)
        if reason:
            found[keys.STEP_REASON] = reason
        if kept:
            found[keys.STEP_KEPT] = kept
        if rejected:
            found[keys.STEP_REJECTED] = rejected
        if len(_STEP_ATTRS) >= _STEP_ATTRS_MAX:
            _STEP_ATTRS.clear()
        _STEP_ATTRS[sig] = found
    return found


def _attempt_attrs(attempt: Mapping[str, Any]) -> Attrs:
    attrs: Attrs = {keys.ATTEMPT_SEQ: attempt["seq"], keys.INSTANCE: attempt["instance"],
                    keys.GEN_AI_REQUEST_MODEL: attempt["model"], keys.ATTEMPT_STATUS: attempt["status"],
                    keys.ATTEMPT_LATENCY_MS: attempt["latency_ms"]}
    _put(attrs, keys.HTTP_STATUS, attempt.get("http_status"))
    _put(attrs, keys.ERROR_TYPE, attempt.get("error_class"))
    return attrs


def to_readable(span: PlainSpan, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    """The SDK's ``ReadableSpan`` of a plain span (what an SDK exporter takes).

    Its ``trace_state`` is the SDK's parse of the header (whitespace around members dropped, and
    nothing of a header with a malformed member); :mod:`ingest.otel.wire` sends the header as the
    gateway passed it on.
    """
    parent = None if span.parent_id is None else _ctx(span.trace_id, span.parent_id, remote=span.parent_remote)
    status = Status(StatusCode.UNSET) if span.error is None else Status(StatusCode.ERROR, span.error)
    context = _ctx(span.trace_id, span.span_id, state=span.trace_state)
    return ReadableSpan(name=span.name, context=context, parent=parent, resource=resource,
                        attributes=span.attributes, events=[Event(e.name, e.attributes, timestamp=e.time_ns)
                                                             for e in span.events],
                        kind=span.kind, status=status, start_time=span.start_ns, end_time=span.end_ns,
                        instrumentation_scope=scope)
