/* Stored traces (parsed JSON) straight to OTLP protobuf spans: the fast path of ingest/otel/spans.py.
 *
 * SpanBuilder.spans() builds a trace's span tree as Python values, which _otlp_wire.c then encodes;
 * on the exporter's thread that building was a quarter of its CPU, the largest part after parsing
 * the JSON (python -m bench gateway --otel). This writes the same spans' bytes from the trace's
 * dicts directly, with no span, event or attribute object in between.
 *
 * It knows one shape: a trace as the gateway and the pipeline write it (each field of the JSON
 * type the contract gives it). A trace of any other shape (a field missing or of another type, a
 * value the encoder would refuse, a time outside uint64) is *declined*: what was written of it is
 * taken back, and SpanBuilder.spans() builds it in Python, whose spans are then encoded one by one
 * (or it raises, and the trace is refused). So the Python builder stays the reference of what the
 * spans are; tests/ingest/otel/test_traces_fast.py holds the two equal byte for byte, for
 * well-formed traces and for dozens of other shapes.
 *
 * What needs Python stays in Python, called once a trace: SpanBuilder.heads() (the ids, derived
 * ones included, and the start in ns from the ISO time) and its trace-page link; attempt_id() for
 * an attempt recorded without a span id. The attribute keys below are ingest/otel/keys.py's.
 */
#include "_otlp_wire.h"

#include <math.h>

#define DECLINED 1 /* the trace is not of the shape known here: no exception, nothing written */

/* The JSON fields read, as str objects made once */
#define FIELDS(X)                                                                                                 \
    X(attempts) X(candidates) X(completion_tokens) X(constraint) X(cost) X(decision_trace) X(duration_us)       \
    X(error_class) X(experiment_arm) X(fallback_reason) X(fallback_triggered) X(feasible) X(features)           \
    X(http_status) X(instance) X(instances) X(intent) X(intent_confidence) X(kind) X(latency_ms) X(max_tokens)  \
    X(metric) X(mode) X(model) X(op) X(otel_parent_span_id) X(otel_trace_state) X(outcome) X(plugin)             \
    X(policy) X(policy_hash) X(prompt_tokens)                                                                    \
    X(query_hash) X(rank) X(reason) X(rejected) X(request_id) X(requested_model) X(router_version) X(rule)      \
    X(selected_instance) X(selected_model) X(selection_probability) X(seq) X(severity) X(span_id) X(start_ms)    \
    X(status) X(step) X(threshold) X(throttled) X(total) X(total_ms) X(ttft_ms) X(value) X(violations) X(waited_s)

#define DECLARE(name) static PyObject *k_##name;
FIELDS(DECLARE)
static PyObject *s_ok, *s_hard, *empty_str;
static const char *const event_steps[] = {"policy", "filter", "score", "pick", "fallback"}; /* spans._EVENT_STEPS */

int traces_init(void) {
#define MAKE(name) if (!(k_##name = PyUnicode_InternFromString(#name))) return -1;
    FIELDS(MAKE)
    return (s_ok = PyUnicode_InternFromString("ok")) && (s_hard = PyUnicode_InternFromString("hard")) &&
                   (empty_str = PyUnicode_New(0, 0))
               ? 0 : -1;
}

/* One field of a dict: a borrowed reference, or NULL when it is absent (with *missing set) */
static PyObject *field(PyObject *d, PyObject *key, int *missing) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v && !PyErr_Occurred()) *missing = 1;
    return v;
}

/* d.get(key): a borrowed reference, None when absent; NULL only with an exception set */
static PyObject *get(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    return v ? v : PyErr_Occurred() ? NULL : Py_None;
}

/* Python's int(x * scale) for a float x, or an int x small enough for the product to be exact */
static int scaled(PyObject *x, double scale, int64_t *out) {
    double d;
    if (PyFloat_CheckExact(x)) {
        d = PyFloat_AS_DOUBLE(x) * scale;
        if (!isfinite(d) || d >= 9.2e18 || d <= -9.2e18) return DECLINED;
        *out = (int64_t)d; /* truncated toward zero, as int() */
        return 0;
    }
    if (!PyLong_CheckExact(x)) return DECLINED;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow || v > (1LL << 31) || v < -(1LL << 31)) return DECLINED;
    *out = (int64_t)v * (int64_t)scale;
    return 0;
}

/* base + int(x * scale): a time that many ns after base (a span's times are unsigned) */
static int after(int64_t base, PyObject *x, double scale, int64_t *out) {
    int64_t d;
    int r = scaled(x, scale, &d);
    return r ? r : __builtin_add_overflow(base, d, out) || *out < 0 ? DECLINED : 0;
}

/* A KeyValue (field `tag` of its message) with a constant key */
static int kv(Buf *b, uint8_t tag, const char *key, PyObject *value) {
    size_t n = strlen(key);
    Py_ssize_t at = open_field(b, tag);
    if (at < 0 || put_byte(b, 0x0A) || put_varint(b, n) || put(b, key, n)) return -1;
    Py_ssize_t any = open_field(b, 0x12);
    return any < 0 || any_value(b, value, 0) || close_field(b, any) || close_field(b, at) ? -1 : 0;
}

static int kv_opt(Buf *b, uint8_t tag, const char *key, PyObject *value) { /* spans._put: None is left out */
    return value == Py_None ? 0 : kv(b, tag, key, value);
}

/* A KeyValue with a constant key and an AnyValue's body already made */
static int kv_raw(Buf *b, uint8_t tag, const char *key, const uint8_t *any, size_t n) {
    size_t k = strlen(key);
    Py_ssize_t at = open_field(b, tag);
    if (at < 0 || put_byte(b, 0x0A) || put_varint(b, k) || put(b, key, k)) return -1;
    return put_byte(b, 0x12) || put_varint(b, n) || put(b, any, n) || close_field(b, at) ? -1 : 0;
}

static int kv_ascii(Buf *b, uint8_t tag, const char *key, const char *value) { /* a short ASCII string */
    uint8_t any[64];
    size_t n = strlen(value);
    any[0] = 0x0A;
    any[1] = (uint8_t)n;
    memcpy(any + 2, value, n);
    return kv_raw(b, tag, key, any, n + 2);
}

static int kv_count(Buf *b, uint8_t tag, const char *key, Py_ssize_t value) { /* an int_value, >= 0 */
    uint8_t any[11] = {0x18};
    size_t n = 1;
    for (uint64_t v = (uint64_t)value; ; v >>= 7) {
        any[n++] = (uint8_t)(v >= 0x80 ? (v | 0x80) : v);
        if (v < 0x80) break;
    }
    return kv_raw(b, tag, key, any, n);
}

static int kv_double(Buf *b, uint8_t tag, const char *key, double value) {
    uint8_t any[9] = {0x21};
    uint64_t bits;
    memcpy(&bits, &value, 8);
    for (int i = 0; i < 8; i++) any[1 + i] = (uint8_t)(bits >> (8 * i));
    return kv_raw(b, tag, key, any, 9);
}

/* A span's name: a prefix and a str */
static int name_field(Buf *b, const char *prefix, PyObject *s) {
    if (!PyUnicode_Check(s)) return DECLINED;
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) return -1;
    size_t p = strlen(prefix);
    return put_byte(b, 0x2A) || put_varint(b, p + (size_t)n) || put(b, prefix, p) || put(b, u, (size_t)n) ? -1 : 0;
}

/* A span's ids and the trace's state (fields 1 to 4; parent None: a root; state None: none, else a str) */
static int span_head(Buf *b, PyObject *trace_id, PyObject *span_id, PyObject *state, PyObject *parent) {
    return id_field(b, 0x0A, trace_id, 16) || id_field(b, 0x12, span_id, 8) || trace_state(b, state) ||
                   (parent != Py_None && id_field(b, 0x22, parent, 8))
               ? -1 : 0;
}

/* A span's kind (SpanKind's value: INTERNAL 0, SERVER 1, CLIENT 2) and times (fields 6 to 8) */
static int span_times(Buf *b, int kind, int64_t start, int64_t end) {
    return put_byte(b, 0x30) || put_varint(b, (uint64_t)kind + 1) || put_byte(b, 0x39) ||
                   put_fixed(b, (uint64_t)start, 8) || put_byte(b, 0x41) || put_fixed(b, (uint64_t)end, 8)
               ? -1 : 0;
}

/* A span's status (error NULL: unset; a str, maybe empty: ERROR with that message) and flags */
static int span_tail(Buf *b, PyObject *error, int remote_parent) {
    Py_ssize_t status = open_field(b, 0x7A);
    if (status < 0) return -1;
    if (error) {
        if (PyUnicode_GET_LENGTH(error) && str_field(b, 0x12, error)) return -1;
        if (put(b, "\x18\x02", 2)) return -1;
    }
    return close_field(b, status) || put(b, "\x85\x01", 2) || put_fixed(b, 0x100 | (remote_parent ? 0x200 : 0), 4)
               ? -1 : 0;
}

/* `x or ""` where x must be None or a str (else the trace is declined) */
static int error_of(PyObject *x, PyObject *empty, PyObject **out) {
    if (x == Py_None || (PyUnicode_Check(x) && !PyUnicode_GET_LENGTH(x))) {
        *out = empty;
        return 0;
    }
    if (!PyUnicode_Check(x)) return DECLINED;
    *out = x;
    return 0;
}

#define TRY(call)                  \
    do {                           \
        int r_ = (call);           \
        if (r_) return r_;         \
    } while (0)
#define NEED(var, d, key)                                 \
    do {                                                  \
        int missing_ = 0;                                 \
        var = field(d, k_##key, &missing_);               \
        if (!var) return missing_ ? DECLINED : -1;        \
    } while (0)
#define GET(var, d, key)             \
    do {                             \
        var = get(d, k_##key);       \
        if (!var) return -1;         \
    } while (0)

/* An attribute per (key, field of d), in order: a `required` field (d[field]) that is missing declines
 * the trace; an optional one (d.get(field)) that is None is left out, as spans._put leaves it */
typedef struct {
    const char *key;
    PyObject **field;
} Attr;

static int attrs_from(Buf *b, uint8_t tag, PyObject *d, const Attr *attrs, size_t n, int required) {
    for (size_t i = 0; i < n; i++) {
        int missing = 0;
        PyObject *v = required ? field(d, *attrs[i].field, &missing) : get(d, *attrs[i].field);
        if (!v) return missing ? DECLINED : -1;
        TRY(required ? kv(b, tag, attrs[i].key, v) : kv_opt(b, tag, attrs[i].key, v));
    }
    return 0;
}
#define ATTRS(b, tag, d, table, required) attrs_from(b, tag, d, table, sizeof table / sizeof *table, required)

/* The request span (spans.SpanBuilder.spans and _request_attrs) */
static int request_span(Buf *b, PyObject *t, PyObject *trace_id, PyObject *span_id, PyObject *state, int64_t start,
                        int64_t end, PyObject *outcome, int failed, PyObject *url) {
    static const Attr of_trace[] = {{"routelens.request_id", &k_request_id}, {"routelens.query_hash", &k_query_hash}};
    static const Attr of_outcome[] = {{"routelens.outcome", &k_status}, {"http.response.status_code", &k_http_status}};
    static const Attr usage[] = {
        {"gen_ai.usage.input_tokens", &k_prompt_tokens}, {"gen_ai.usage.output_tokens", &k_completion_tokens},
        {"error.type", &k_error_class}, {"routelens.cost", &k_cost}, {"routelens.ttft_ms", &k_ttft_ms},
    };
    PyObject *features, *model, *parent, *v, *error = NULL;
    NEED(features, t, features);
    if (!PyDict_CheckExact(features)) return DECLINED;
    NEED(model, features, requested_model);
    GET(parent, t, otel_parent_span_id);
    TRY(span_head(b, trace_id, span_id, state, parent));
    TRY(name_field(b, "chat ", model));
    TRY(span_times(b, 1, start, end));
    TRY(kv_ascii(b, 0x4A, "gen_ai.operation.name", "chat"));
    TRY(kv(b, 0x4A, "gen_ai.request.model", model));
    TRY(ATTRS(b, 0x4A, t, of_trace, 1));
    TRY(ATTRS(b, 0x4A, outcome, of_outcome, 1));
    GET(v, t, selected_model);
    TRY(kv_opt(b, 0x4A, "gen_ai.response.model", v));
    GET(v, features, max_tokens);
    TRY(kv_opt(b, 0x4A, "gen_ai.request.max_tokens", v));
    TRY(ATTRS(b, 0x4A, outcome, usage, 0));
    if (url) TRY(kv(b, 0x4A, "routelens.trace_url", url));
    if (failed) {
        GET(v, outcome, error_class);
        TRY(error_of(v, empty_str, &error));
    }
    return span_tail(b, error, parent != Py_None);
}

/* spans.margin_of: the best total over the runner-up's, among ranked candidates (a stable descending sort's first two) */
static int margin(PyObject *candidates, int *has, double *out) {
    double first = 0, second = 0;
    int n = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(candidates); i++) {
        PyObject *c = PyList_GET_ITEM(candidates, i), *rank, *total;
        GET(rank, c, rank);
        GET(total, c, total);
        if (rank == Py_None || total == Py_None) continue;
        if (!PyFloat_CheckExact(total) || isnan(PyFloat_AS_DOUBLE(total))) return DECLINED;
        double x = PyFloat_AS_DOUBLE(total);
        if (n == 0) {
            first = x;
            n = 1;
        } else if (x > first) { /* an equal total stays behind the first: the sort is stable */
            second = first;
            first = x;
            n = 2;
        } else if (n == 1 || x > second) {
            second = x;
            n = 2;
        }
    }
    *has = n >= 2;
    *out = first - second;
    return 0;
}

/* One step's event (spans._step_attrs): the shapes whose attributes Python could key its cache on */
static int step_event(Buf *b, PyObject *step, PyObject *kind, int64_t t) {
    PyObject *name, *plugin, *value, *reason, *kept, *rejected;
    NEED(name, step, step);
    if (!PyUnicode_Check(name)) return DECLINED;
    GET(plugin, step, plugin);
    GET(value, step, value);
    GET(reason, step, reason);
    GET(kept, step, instances);
    GET(rejected, step, rejected);
    if ((plugin != Py_None && !PyUnicode_Check(plugin)) || (reason != Py_None && !PyUnicode_Check(reason)) ||
        !(value == Py_None || PyUnicode_Check(value) || PyLong_Check(value) || PyFloat_Check(value)))
        return DECLINED;
    PyObject *lists[2] = {kept, rejected};
    for (int j = 0; j < 2; j++) {
        if (lists[j] == Py_None) continue;
        if (!PyList_CheckExact(lists[j])) return DECLINED;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lists[j]); i++)
            if (!PyUnicode_Check(PyList_GET_ITEM(lists[j], i))) return DECLINED;
    }
    Py_ssize_t at = open_field(b, 0x5A);
    if (at < 0 || put_byte(b, 0x09) || put_fixed(b, (uint64_t)t, 8) || str_field(b, 0x12, name)) return -1;
    TRY(kv(b, 0x1A, "routelens.step.kind", kind));
    TRY(kv_opt(b, 0x1A, "routelens.step.plugin", plugin));
    TRY(kv_opt(b, 0x1A, "routelens.step.value", value));
    if (reason != Py_None && PyUnicode_GET_LENGTH(reason)) TRY(kv(b, 0x1A, "routelens.step.reason", reason));
    if (kept != Py_None && PyList_GET_SIZE(kept)) TRY(kv(b, 0x1A, "routelens.step.kept", kept));
    if (rejected != Py_None && PyList_GET_SIZE(rejected)) TRY(kv(b, 0x1A, "routelens.step.rejected", rejected));
    return close_field(b, at);
}

static int is_event_step(PyObject *kind) {
    for (size_t i = 0; i < sizeof event_steps / sizeof *event_steps; i++)
        if (PyUnicode_CompareWithASCIIString(kind, event_steps[i]) == 0) return 1;
    return 0;
}

/* An eliminated candidate's event: its instance and model, then the violation v (NULL: "not feasible") */
static int eliminated(Buf *b, PyObject *instance, PyObject *model, PyObject *v, int64_t end) {
    Py_ssize_t at = open_field(b, 0x5A);
    if (at < 0 || put_byte(b, 0x09) || put_fixed(b, (uint64_t)end, 8) || put(b, "\x12\x0a" "eliminated", 12)) return -1;
    TRY(kv(b, 0x1A, "routelens.candidate.instance", instance));
    TRY(kv(b, 0x1A, "routelens.candidate.model", model));
    if (!v) {
        TRY(kv_ascii(b, 0x1A, "routelens.reason", "not feasible"));
        return close_field(b, at);
    }
    static const Attr violation[] = {
        {"routelens.constraint", &k_constraint}, {"routelens.reason", &k_reason}, {"routelens.metric", &k_metric},
        {"routelens.op", &k_op}, {"routelens.threshold", &k_threshold},
    };
    PyObject *severity, *value;
    TRY(ATTRS(b, 0x1A, v, violation, 1));
    GET(value, v, value);
    severity = PyDict_GetItemWithError(v, k_severity);
    if (!severity && PyErr_Occurred()) return -1;
    TRY(kv(b, 0x1A, "routelens.severity", severity ? severity : s_hard));
    TRY(kv_opt(b, 0x1A, "routelens.value", value));
    return close_field(b, at);
}

/* The decision span's events (spans.SpanBuilder._events): one per policy, filter, scorer, pick or fallback
 * step, at its time; then one per eliminated candidate's hard violation (or "not feasible"), at the end */
static int events(Buf *b, PyObject *steps, PyObject *candidates, int64_t start) {
    PyObject *v;
    int64_t at = start;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(steps); i++) {
        PyObject *step = PyList_GET_ITEM(steps, i), *kind;
        if (!PyDict_CheckExact(step)) return DECLINED;
        GET(v, step, duration_us);
        if (v != Py_None) TRY(after(at, v, 1000, &at));
        NEED(kind, step, kind);
        if (!PyUnicode_Check(kind)) return DECLINED;
        if (is_event_step(kind)) TRY(step_event(b, step, kind, at));
    }
    int64_t last = at > start ? at : start;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(candidates); i++) {
        PyObject *c = PyList_GET_ITEM(candidates, i), *f, *violations, *instance, *model;
        NEED(f, c, feasible);
        int yes = PyObject_IsTrue(f);
        if (yes < 0) return -1;
        if (yes) continue;
        GET(violations, c, violations);
        if (violations != Py_None && !PyList_CheckExact(violations)) return DECLINED;
        NEED(instance, c, instance);
        NEED(model, c, model);
        int hard = 0;
        for (Py_ssize_t j = 0; violations != Py_None && j < PyList_GET_SIZE(violations); j++) {
            PyObject *viol = PyList_GET_ITEM(violations, j), *severity;
            if (!PyDict_CheckExact(viol)) return DECLINED;
            severity = PyDict_GetItemWithError(viol, k_severity);
            if (!severity && PyErr_Occurred()) return -1;
            if (severity && severity != Py_None && !PyUnicode_Check(severity)) return DECLINED;
            if (severity && (severity == Py_None || PyUnicode_Compare(severity, s_hard) != 0)) continue;
            hard++;
            TRY(eliminated(b, instance, model, viol, last));
        }
        if (!hard) TRY(eliminated(b, instance, model, NULL, last));
    }
    return 0;
}

/* The decision span (spans.SpanBuilder._decision_attrs), then its events */
static int decision_span(Buf *b, PyObject *t, PyObject *trace_id, PyObject *request_span, PyObject *decision_id,
                         PyObject *state, int64_t start, int64_t end, PyObject *url) {
    PyObject *candidates, *steps, *v;
    NEED(candidates, t, candidates);
    NEED(steps, t, decision_trace);
    if (!PyList_CheckExact(candidates) || !PyList_CheckExact(steps)) return DECLINED;
    Py_ssize_t feasible = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(candidates); i++) {
        PyObject *c = PyList_GET_ITEM(candidates, i), *f;
        if (!PyDict_CheckExact(c)) return DECLINED;
        NEED(f, c, feasible);
        int yes = PyObject_IsTrue(f);
        if (yes < 0) return -1;
        feasible += yes;
    }
    TRY(span_head(b, trace_id, decision_id, state, request_span));
    if (put(b, "\x2a\x10" "routelens.decide", 18)) return -1;
    TRY(span_times(b, 0, start, end));
    TRY(kv_ascii(b, 0x4A, "openinference.span.kind", "DECISION"));
    static const Attr head[] = {
        {"routelens.router_version", &k_router_version}, {"routelens.policy_hash", &k_policy_hash},
        {"routelens.mode", &k_mode}, {"routelens.fallback", &k_fallback_triggered},
    };
    static const Attr optional[] = {
        {"routelens.rule", &k_rule}, {"routelens.intent", &k_intent},
        {"routelens.intent_confidence", &k_intent_confidence}, {"routelens.arm", &k_experiment_arm},
        {"routelens.selected_instance", &k_selected_instance}, {"routelens.selected_model", &k_selected_model},
        {"routelens.fallback_reason", &k_fallback_reason},
        {"routelens.selection_probability", &k_selection_probability},
    };
    TRY(ATTRS(b, 0x4A, t, head, 1));
    TRY(kv_count(b, 0x4A, "routelens.candidates", PyList_GET_SIZE(candidates)));
    TRY(kv_count(b, 0x4A, "routelens.feasible", feasible));
    NEED(v, t, latency_ms);
    TRY(kv(b, 0x4A, "routelens.decision_ms", v));
    TRY(ATTRS(b, 0x4A, t, optional, 0));
    static const Attr throttle[] = {
        {"routelens.throttled", &k_throttled}, {"routelens.throttle.waited_s", &k_waited_s},
    };
    GET(v, t, policy);
    if (v != Py_None) { /* the policy step's throttle verdict and wait; a policy not a dict: declined */
        if (!PyDict_CheckExact(v)) return DECLINED;
        TRY(ATTRS(b, 0x4A, v, throttle, 0));
    }
    int has_margin;
    double m;
    TRY(margin(candidates, &has_margin, &m));
    if (has_margin) TRY(kv_double(b, 0x4A, "routelens.margin", m));
    if (url) TRY(kv(b, 0x4A, "routelens.trace_url", url));
    TRY(events(b, steps, candidates, start));
    return span_tail(b, NULL, 0);
}

/* One attempt's span (spans.SpanBuilder.spans and _attempt_attrs); *at: where the one before ended */
static int attempt_span(Buf *b, PyObject *a, PyObject *trace_id, PyObject *span_id, PyObject *request_span,
                        PyObject *state, int64_t start, int64_t *at_) {
    PyObject *sent, *latency, *instance, *status, *v, *error = NULL;
    int64_t at = *at_;
    GET(sent, a, start_ms);
    if (sent != Py_None) TRY(after(start, sent, 1e6, &at));
    NEED(latency, a, latency_ms);
    int64_t end;
    TRY(after(at, latency, 1e6, &end));
    NEED(instance, a, instance);
    NEED(status, a, status);
    PyObject *error_class;
    GET(error_class, a, error_class);
    int failed = PyObject_RichCompareBool(status, s_ok, Py_NE);
    if (failed < 0) return -1;
    if (failed) TRY(error_of(error_class, empty_str, &error));
    Py_ssize_t span = open_field(b, 0x12);
    if (span < 0) return -1;
    TRY(span_head(b, trace_id, span_id, state, request_span));
    TRY(name_field(b, "routelens.attempt ", instance));
    TRY(span_times(b, 2, at, end));
    NEED(v, a, seq);
    TRY(kv(b, 0x4A, "routelens.attempt.seq", v));
    TRY(kv(b, 0x4A, "routelens.instance", instance));
    NEED(v, a, model);
    TRY(kv(b, 0x4A, "gen_ai.request.model", v));
    TRY(kv(b, 0x4A, "routelens.attempt.status", status));
    TRY(kv(b, 0x4A, "routelens.attempt.latency_ms", latency));
    GET(v, a, http_status);
    TRY(kv_opt(b, 0x4A, "http.response.status_code", v));
    TRY(kv_opt(b, 0x4A, "error.type", error_class));
    TRY(span_tail(b, error, 0));
    if (close_field(b, span)) return -1;
    *at_ = end;
    return 0;
}

/* Each attempt's span, after the decision's */
static int attempt_spans(Buf *b, PyObject *t, PyObject *trace_id, PyObject *request_span, PyObject *state,
                         int64_t start, int64_t decision_end, PyObject *attempt_id, Py_ssize_t *spans) {
    PyObject *attempts;
    NEED(attempts, t, attempts);
    if (!PyList_CheckExact(attempts)) return DECLINED;
    int64_t at = decision_end;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(attempts); i++) {
        PyObject *a = PyList_GET_ITEM(attempts, i), *span_id;
        if (!PyDict_CheckExact(a)) return DECLINED;
        GET(span_id, a, span_id);
        PyObject *derived = NULL; /* no span id of its own: SpanBuilder.attempt_id's */
        if (span_id == Py_None || (PyUnicode_Check(span_id) && !PyUnicode_GET_LENGTH(span_id))) {
            PyObject *seq;
            NEED(seq, a, seq);
            if (!(span_id = derived = PyObject_CallFunctionObjArgs(attempt_id, request_span, seq, NULL))) return -1;
        }
        int r = attempt_span(b, a, trace_id, span_id, request_span, state, start, &at);
        Py_XDECREF(derived);
        if (r) return r;
        ++*spans;
    }
    return 0;
}


/* The SpanBuilder's methods this path calls (see encode_traces) */
typedef struct {
    PyObject *heads, *link, *attempt_id, *spans;
} Builder;

/* One trace's spans, appended to b (0), or nothing written (DECLINED), or -1: out of memory */
static int trace_spans(Buf *b, PyObject *t, const Builder *builder, Py_ssize_t *spans) {
    if (!PyDict_CheckExact(t)) return DECLINED;
    PyObject *h = PyObject_CallOneArg(builder->heads, t); /* raising, it is declined: the builder raises it again */
    int r = DECLINED;
    PyObject *url = NULL;
    int64_t start;
    PyObject *outcome, *latency, *total, *status, *state;
    if (!h || !PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 4 || !PyLong_CheckExact(PyTuple_GET_ITEM(h, 3))) goto done;
    start = PyLong_AsLongLong(PyTuple_GET_ITEM(h, 3));
    if (start < 0) goto done; /* -1 with OverflowError too: declined */
    PyObject *trace_id = PyTuple_GET_ITEM(h, 0), *span_id = PyTuple_GET_ITEM(h, 1), *decision_id = PyTuple_GET_ITEM(h, 2);
    int missing = 0;
    if (!(outcome = field(t, k_outcome, &missing)) || !PyDict_CheckExact(outcome) ||
        !(latency = field(t, k_latency_ms, &missing)) || !(total = field(outcome, k_total_ms, &missing)) ||
        !(status = field(outcome, k_status, &missing))) {
        r = missing || !PyErr_Occurred() ? DECLINED : -1;
        goto done;
    }
    if (!(state = get(t, k_otel_trace_state))) {
        r = -1;
        goto done;
    }
    if (state != Py_None && !PyUnicode_Check(state)) goto done; /* declined: the encoder refuses the builder's spans */
    int64_t decision_end, request_end;
    if ((r = after(start, latency, 1e6, &decision_end)) || (r = after(start, total, 1e6, &request_end))) goto done;
    if (request_end < decision_end) request_end = decision_end;
    int failed = PyObject_RichCompareBool(status, s_ok, Py_NE);
    if (failed < 0) {
        r = -1;
        goto done;
    }
    if (builder->link != Py_None) {
        PyObject *request_id = PyDict_GetItemWithError(t, k_request_id);
        if (!request_id || !(url = PyObject_CallOneArg(builder->link, request_id))) {
            r = PyErr_Occurred() ? -1 : DECLINED;
            goto done;
        }
    }
    Py_ssize_t at = open_field(b, 0x12);
    if (at < 0 || (r = request_span(b, t, trace_id, span_id, state, start, request_end, outcome, failed, url)) ||
        (r = close_field(b, at)))
        goto done;
    if ((at = open_field(b, 0x12)) < 0 ||
        (r = decision_span(b, t, trace_id, span_id, decision_id, state, start, decision_end, url)) ||
        (r = close_field(b, at)))
        goto done;
    *spans += 2;
    r = attempt_spans(b, t, trace_id, span_id, state, start, decision_end, builder->attempt_id, spans);
done:
    /* What raised (the builder's heads, a value the encoder refuses: TypeError, OverflowError,
     * ValueError, UnicodeEncodeError) is a shape not known here; only running out of memory is an
     * error of this call. */
    if (r < 0 || PyErr_Occurred()) {
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_MemoryError)) {
            r = -1;
        } else {
            PyErr_Clear();
            r = DECLINED;
        }
    }
    Py_XDECREF(url);
    Py_XDECREF(h);
    return r;
}

/* A declined trace, as SpanBuilder.spans() builds it: its spans written one by one, one the encoder
 * refuses left out (counted in *dropped, as OtlpSink._encode drops it), or its error appended to
 * `rejected` as (index, exception) when the builder raises what a trace of another shape makes it raise
 * (AttributeError, KeyError, TypeError, ValueError) */
static int built_spans(Buf *b, PyObject *t, Py_ssize_t index, const Builder *builder, PyObject *rejected,
                       Py_ssize_t *spans, Py_ssize_t *dropped) {
    PyObject *list = PyObject_CallOneArg(builder->spans, t);
    if (!list) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_KeyError) &&
            !PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *item = value ? Py_BuildValue("(nO)", index, value) : NULL;
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        int failed = !item || PyList_Append(rejected, item);
        Py_XDECREF(item);
        return failed ? -1 : 0;
    }
    int r = 0;
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "SpanBuilder.spans() must return a list");
        r = -1;
    }
    for (Py_ssize_t i = 0; !r && i < PyList_GET_SIZE(list); i++) {
        size_t mark = b->len;
        Py_ssize_t at = open_field(b, 0x12);
        if (at >= 0 && !span(b, PyList_GET_ITEM(list, i)) && !close_field(b, at)) {
            ++*spans;
        } else if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
            r = -1;
        } else {
            PyErr_Clear();
            b->len = mark;
            ++*dropped;
        }
    }
    Py_DECREF(list);
    return r;
}

const char encode_traces_doc[] =
    "encode_traces(resource, scope, traces, builder, /)\n--\n\n"
    "The ExportTraceServiceRequest of the span trees of traces (parsed JSON dicts), the bytes that\n"
    "encode_request(resource, scope, [span for t in traces for span in builder.spans(t)]) writes:\n"
    "(body, spans, rejected, dropped). A trace of a shape not known here is built by builder.spans();\n"
    "when that raises AttributeError, KeyError, TypeError or ValueError the trace is left out and\n"
    "(its index, the exception) is in rejected; a span the encoder refuses is left out and counted\n"
    "in dropped.\n"
    "builder: a SpanBuilder (its heads, link, attempt_id and spans).";

PyObject *encode_traces(PyObject *self, PyObject *args) {
    PyObject *resource, *scope, *traces, *of;
    if (!PyArg_ParseTuple(args, "OOO!O:encode_traces", &resource, &scope, &PyList_Type, &traces, &of)) return NULL;
    Builder builder = {PyObject_GetAttrString(of, "heads"), PyObject_GetAttrString(of, "link"),
                       PyObject_GetAttrString(of, "attempt_id"), PyObject_GetAttrString(of, "spans")};
    Buf b = {NULL, 0, 0};
    Py_ssize_t open[2], spans = 0, dropped = 0;
    PyObject *rejected = PyList_New(0), *out = NULL;
    if (!builder.heads || !builder.link || !builder.attempt_id || !builder.spans || !rejected ||
        open_request(&b, resource, scope, open))
        goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(traces); i++) {
        size_t mark = b.len;
        Py_ssize_t counted = spans;
        PyObject *t = PyList_GET_ITEM(traces, i);
        Py_INCREF(t); /* held while the builder's Python code runs */
        int r = trace_spans(&b, t, &builder, &spans);
        if (r == DECLINED) {
            b.len = mark;
            spans = counted;
            r = built_spans(&b, t, i, &builder, rejected, &spans, &dropped);
        }
        Py_DECREF(t);
        if (r < 0) goto fail;
    }
    if (!close_request(&b, open))
        out = Py_BuildValue("(y#nOn)", (const char *)b.p, (Py_ssize_t)b.len, spans, rejected, dropped);
fail:
    Py_XDECREF(builder.heads);
    Py_XDECREF(builder.link);
    Py_XDECREF(builder.attempt_id);
    Py_XDECREF(builder.spans);
    Py_XDECREF(rejected);
    PyMem_Free(b.p);
    return out;
}
