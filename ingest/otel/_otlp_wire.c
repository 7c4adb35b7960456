/* Plain spans to the OTLP protobuf body (ExportTraceServiceRequest): the fast path of ingest/otel/wire.py.
 *
 * wire.py's Python encoder is the reference and the fallback where this is not built; this writes
 * the same bytes for the same spans (tests/ingest/otel/test_wire.py holds the two equal to each
 * other and to the SDK's encoding) at a tenth of the CPU: the exporter's thread spent about half of
 * its time in the Python encoder (python -m bench gateway --otel).
 *
 * Each length-delimited field is opened with its tag and one byte for its length, written into, and
 * closed: a length over 127 moves the field's body up by the varint's extra bytes (_otlp_wire.h,
 * shared with _otlp_traces.c, which writes spans straight from stored traces). The input is the
 * PlainSpan and PlainEvent tuples of ingest/otel/spans.py, read by position. What cannot be encoded
 * raises as the Python encoder does: TypeError (an attribute value of another type), OverflowError
 * (an int outside int64, a time outside uint64), ValueError (an id that is not hex of its length),
 * UnicodeEncodeError (a string with a lone surrogate).
 */
#include "_otlp_wire.h" /* Python.h, the output buffer and its helpers */

#define MAX_DEPTH 32 /* arrays of arrays */

/* PlainSpan's and PlainEvent's fields, by position */
enum { S_TRACE, S_SPAN, S_PARENT, S_REMOTE, S_NAME, S_KIND, S_START, S_END, S_ATTRS, S_EVENTS, S_ERROR, S_STATE, S_N };
enum { E_NAME, E_TIME, E_ATTRS, E_N_MIN = 3 };

int str_field(Buf *b, uint8_t tag, PyObject *s) {
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "expected a str, not %.100s", Py_TYPE(s)->tp_name);
        return -1;
    }
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) return -1;
    return put_byte(b, tag) || put_varint(b, (uint64_t)n) || put(b, u, (size_t)n) ? -1 : 0;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* An id's field: its tag, its length, and the bytes its hex names (exactly 2 * size digits) */
int id_field(Buf *b, uint8_t tag, PyObject *s, int size) {
    Py_ssize_t n;
    const char *u = PyUnicode_Check(s) ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
    if (!u) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "an id must be a str, not %.100s", Py_TYPE(s)->tp_name);
        return -1;
    }
    if (n != 2 * size) {
        PyErr_Format(PyExc_ValueError, "an id of %d bytes is %d hex digits, not %zd", size, 2 * size, n);
        return -1;
    }
    if (put_byte(b, tag) || put_byte(b, (uint8_t)size) || grow(b, (size_t)size)) return -1;
    for (int i = 0; i < size; i++) {
        int hi = hex_digit(u[2 * i]), lo = hex_digit(u[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            PyErr_Format(PyExc_ValueError, "an id is not hex: %R", s);
            return -1;
        }
        b->p[b->len++] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

static int time_field(Buf *b, uint8_t tag, PyObject *v) { /* a fixed64 time in ns */
    unsigned long long t = PyLong_AsUnsignedLongLong(v);
    if (t == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    return put_byte(b, tag) || put_fixed(b, t, 8) ? -1 : 0;
}

/* An AnyValue's body: string_value, bool_value, int_value, double_value or array_value */
int any_value(Buf *b, PyObject *v, int depth) {
    if (PyUnicode_Check(v)) return str_field(b, 0x0A, v);
    if (PyBool_Check(v)) return put(b, v == Py_True ? "\x10\x01" : "\x10\x00", 2);
    if (PyLong_Check(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow) {
            PyErr_SetString(PyExc_OverflowError, "an attribute's int is outside int64");
            return -1;
        }
        if (x == -1 && PyErr_Occurred()) return -1;
        return put_byte(b, 0x18) || put_varint(b, (uint64_t)x) ? -1 : 0; /* negative: two's complement */
    }
    if (PyFloat_Check(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        uint64_t bits;
        memcpy(&bits, &d, 8);
        return put_byte(b, 0x21) || put_fixed(b, bits, 8) ? -1 : 0;
    }
    if (PyList_Check(v) || PyTuple_Check(v)) {
        if (depth >= MAX_DEPTH) {
            PyErr_SetString(PyExc_ValueError, "an attribute's arrays are nested too deep");
            return -1;
        }
        Py_ssize_t array = open_field(b, 0x2A);
        if (array < 0) return -1;
        /* a list's items are read one by one: nothing here runs Python code that could change it */
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++) {
            Py_ssize_t item = open_field(b, 0x0A);
            if (item < 0 || any_value(b, PySequence_Fast_GET_ITEM(v, i), depth + 1) || close_field(b, item))
                return -1;
        }
        return close_field(b, array);
    }
    PyErr_Format(PyExc_TypeError, "attribute value of type %.100s", Py_TYPE(v)->tp_name);
    return -1;
}

/* Each (key, value) of a dict as a KeyValue, field `tag` of its parent */
int attributes(Buf *b, uint8_t tag, PyObject *attrs) {
    if (!PyDict_Check(attrs)) {
        PyObject *copy = PyDict_New();
        if (!copy) return -1;
        int failed = PyDict_Merge(copy, attrs, 1) || attributes(b, tag, copy);
        Py_DECREF(copy);
        return failed ? -1 : 0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(attrs, &pos, &key, &value)) {
        Py_ssize_t kv = open_field(b, tag);
        if (kv < 0 || str_field(b, 0x0A, key)) return -1;
        Py_ssize_t any = open_field(b, 0x12);
        if (any < 0 || any_value(b, value, 0) || close_field(b, any) || close_field(b, kv)) return -1;
    }
    return 0;
}

static PyObject *field_of(PyObject *t, Py_ssize_t n, const char *what) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < n) {
        PyErr_Format(PyExc_TypeError, "a %s must be a tuple of %zd fields, not %.100s", what, n, Py_TYPE(t)->tp_name);
        return NULL;
    }
    return t;
}

static int event(Buf *b, PyObject *ev) {
    if (!field_of(ev, E_N_MIN, "PlainEvent")) return -1;
    Py_ssize_t at = open_field(b, 0x5A);
    return at < 0 || time_field(b, 0x09, PyTuple_GET_ITEM(ev, E_TIME)) ||
                   str_field(b, 0x12, PyTuple_GET_ITEM(ev, E_NAME)) ||
                   attributes(b, 0x1A, PyTuple_GET_ITEM(ev, E_ATTRS)) || close_field(b, at)
               ? -1 : 0;
}

/* SpanKind's members, each read once: an enum's value is a property, slow to read for every span */
static PyObject *kinds[8];
static unsigned long long kind_values[8];

static int span_kind(PyObject *kind, unsigned long long *out) { /* SpanKind (or its int value) */
    int free_slot = -1;
    for (int i = 0; i < 8; i++) {
        if (kinds[i] == kind) {
            *out = kind_values[i];
            return 0;
        }
        if (!kinds[i] && free_slot < 0) free_slot = i;
    }
    PyObject *value = PyLong_Check(kind) ? (Py_INCREF(kind), kind) : PyObject_GetAttrString(kind, "value");
    if (!value) return -1;
    *out = PyLong_AsUnsignedLongLong(value);
    Py_DECREF(value);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    if (free_slot >= 0 && !PyLong_Check(kind)) { /* kept for good: SpanKind has six members */
        Py_INCREF(kind);
        kinds[free_slot] = kind;
        kind_values[free_slot] = *out;
    }
    return 0;
}

/* A span's trace_state (field 3): a str, written as it is unless empty; None: none */
int trace_state(Buf *b, PyObject *state) {
    if (state == Py_None) return 0;
    if (!PyUnicode_Check(state)) {
        PyErr_Format(PyExc_TypeError, "expected a str, not %.100s", Py_TYPE(state)->tp_name);
        return -1;
    }
    return PyUnicode_GET_LENGTH(state) ? str_field(b, 0x1A, state) : 0;
}

int span(Buf *b, PyObject *s) {
    if (!field_of(s, S_N, "PlainSpan")) return -1;
    PyObject *parent = PyTuple_GET_ITEM(s, S_PARENT), *error = PyTuple_GET_ITEM(s, S_ERROR);
    unsigned long long kind;
    if (id_field(b, 0x0A, PyTuple_GET_ITEM(s, S_TRACE), 16) || id_field(b, 0x12, PyTuple_GET_ITEM(s, S_SPAN), 8) ||
        trace_state(b, PyTuple_GET_ITEM(s, S_STATE)) ||
        (parent != Py_None && id_field(b, 0x22, parent, 8)) || str_field(b, 0x2A, PyTuple_GET_ITEM(s, S_NAME)) ||
        span_kind(PyTuple_GET_ITEM(s, S_KIND), &kind) || put_byte(b, 0x30) || put_varint(b, kind + 1) ||
        time_field(b, 0x39, PyTuple_GET_ITEM(s, S_START)) || time_field(b, 0x41, PyTuple_GET_ITEM(s, S_END)) ||
        attributes(b, 0x4A, PyTuple_GET_ITEM(s, S_ATTRS)))
        return -1;
    PyObject *events = PyTuple_GET_ITEM(s, S_EVENTS);
    if (!PyList_Check(events) && !PyTuple_Check(events)) {
        PyErr_Format(PyExc_TypeError, "a span's events must be a list, not %.100s", Py_TYPE(events)->tp_name);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(events); i++)
        if (event(b, PySequence_Fast_GET_ITEM(events, i))) return -1;
    Py_ssize_t status = open_field(b, 0x7A); /* None: unset; a string (maybe empty): ERROR with that message */
    if (status < 0) return -1;
    if (error != Py_None) {
        if (!PyUnicode_Check(error)) {
            PyErr_Format(PyExc_TypeError, "a span's error must be a str or None, not %.100s", Py_TYPE(error)->tp_name);
            return -1;
        }
        if (PyUnicode_GET_LENGTH(error) && str_field(b, 0x12, error)) return -1;
        if (put(b, "\x18\x02", 2)) return -1;
    }
    if (close_field(b, status)) return -1;
    int remote = 0;
    if (parent != Py_None && (remote = PyObject_IsTrue(PyTuple_GET_ITEM(s, S_REMOTE))) < 0) return -1;
    return put(b, "\x85\x01", 2) || put_fixed(b, 0x100 | (remote ? 0x200 : 0), 4) ? -1 : 0; /* flags */
}

int open_request(Buf *b, PyObject *resource, PyObject *scope, Py_ssize_t open[2]) {
    if (!PyTuple_Check(scope) || PyTuple_GET_SIZE(scope) != 2) {
        PyErr_SetString(PyExc_TypeError, "scope must be a (name, version) tuple");
        return -1;
    }
    PyObject *version = PyTuple_GET_ITEM(scope, 1);
    int versioned = version == Py_None ? 0 : PyObject_IsTrue(version);
    if (versioned < 0) return -1;
    Py_ssize_t resource_spans = open_field(b, 0x0A), res = open_field(b, 0x0A);
    if (resource_spans < 0 || res < 0 || attributes(b, 0x0A, resource) || close_field(b, res)) return -1;
    Py_ssize_t scope_spans = open_field(b, 0x12), scope_msg = open_field(b, 0x0A);
    if (scope_spans < 0 || scope_msg < 0 || str_field(b, 0x0A, PyTuple_GET_ITEM(scope, 0)) ||
        (versioned && str_field(b, 0x12, version)) || close_field(b, scope_msg))
        return -1;
    open[0] = resource_spans;
    open[1] = scope_spans;
    return 0;
}

int close_request(Buf *b, const Py_ssize_t open[2]) {
    return close_field(b, open[1]) || close_field(b, open[0]) ? -1 : 0;
}

static int request(Buf *b, PyObject *resource, PyObject *scope, PyObject *spans) {
    Py_ssize_t open[2];
    if (open_request(b, resource, scope, open)) return -1;
    if (!PyList_Check(spans) && !PyTuple_Check(spans)) {
        PyErr_Format(PyExc_TypeError, "spans must be a list, not %.100s", Py_TYPE(spans)->tp_name);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(spans); i++) {
        Py_ssize_t at = open_field(b, 0x12);
        if (at < 0 || span(b, PySequence_Fast_GET_ITEM(spans, i)) || close_field(b, at)) return -1;
    }
    return close_request(b, open);
}

PyDoc_STRVAR(encode_request_doc,
             "encode_request(resource, scope, spans, /)\n--\n\n"
             "The ExportTraceServiceRequest of spans (PlainSpan tuples), all of one resource and one\n"
             "instrumentation scope (name, version): ingest.otel.wire.encode_request, in C.");

static PyObject *encode_request(PyObject *self, PyObject *args) {
    PyObject *resource, *scope, *spans;
    if (!PyArg_ParseTuple(args, "OOO:encode_request", &resource, &scope, &spans)) return NULL;
    Buf b = {NULL, 0, 0};
    PyObject *out = request(&b, resource, scope, spans) ? NULL : PyBytes_FromStringAndSize((const char *)b.p,
                                                                                          (Py_ssize_t)b.len);
    PyMem_Free(b.p);
    return out;
}

static PyMethodDef methods[] = {
    {"encode_request", encode_request, METH_VARARGS, encode_request_doc},
    {"encode_traces", encode_traces, METH_VARARGS, encode_traces_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_otlp_wire", "Plain spans to the OTLP protobuf body (see ingest/otel/wire.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__otlp_wire(void) { return traces_init() ? NULL : PyModule_Create(&module); }
