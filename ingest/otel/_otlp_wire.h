/* What _otlp_wire.c (plain spans to OTLP protobuf) and _otlp_traces.c (stored traces straight to it) share.
 *
 * Each returns 0, or -1 with a Python exception set. */
#ifndef ROUTELENS_OTLP_WIRE_H
#define ROUTELENS_OTLP_WIRE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

typedef struct {
    uint8_t *p;
    size_t len, cap;
} Buf;

static inline int grow(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 16384;
    while (cap < b->len + extra) cap *= 2;
    uint8_t *p = PyMem_Realloc(b->p, cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int put(Buf *b, const void *src, size_t n) {
    if (grow(b, n)) return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static inline int put_byte(Buf *b, uint8_t c) {
    if (grow(b, 1)) return -1;
    b->p[b->len++] = c;
    return 0;
}

static inline int put_varint(Buf *b, uint64_t n) {
    if (grow(b, 10)) return -1;
    while (n >= 0x80) {
        b->p[b->len++] = (uint8_t)(n | 0x80);
        n >>= 7;
    }
    b->p[b->len++] = (uint8_t)n;
    return 0;
}

static inline int put_fixed(Buf *b, uint64_t v, int size) { /* little-endian fixed32 or fixed64 */
    if (grow(b, size)) return -1;
    for (int i = 0; i < size; i++) b->p[b->len++] = (uint8_t)(v >> (8 * i));
    return 0;
}

/* A length-delimited field: open() writes its tag and a one-byte length and returns where its body
 * starts (-1: out of memory); close() writes the body's length there. */
static inline Py_ssize_t open_field(Buf *b, uint8_t tag) {
    if (grow(b, 2)) return -1;
    b->p[b->len++] = tag;
    b->p[b->len++] = 0;
    return (Py_ssize_t)b->len;
}

static inline int close_field(Buf *b, Py_ssize_t start) {
    size_t n = b->len - (size_t)start;
    if (n < 0x80) {
        b->p[start - 1] = (uint8_t)n;
        return 0;
    }
    uint8_t len[10];
    int k = 0;
    for (size_t m = n; ; m >>= 7) {
        len[k++] = (uint8_t)(m >= 0x80 ? (m | 0x80) : m);
        if (m < 0x80) break;
    }
    if (grow(b, (size_t)k - 1)) return -1;
    memmove(b->p + start + k - 1, b->p + start, n);
    memcpy(b->p + start - 1, len, (size_t)k);
    b->len += (size_t)k - 1;
    return 0;
}

int str_field(Buf *b, uint8_t tag, PyObject *s);           /* a str's UTF-8 */
int id_field(Buf *b, uint8_t tag, PyObject *s, int size);  /* hex of exactly 2 * size digits, as bytes */
int trace_state(Buf *b, PyObject *state);                  /* a span's trace_state: None, or a str */
int any_value(Buf *b, PyObject *v, int depth);             /* an AnyValue's body */
int attributes(Buf *b, uint8_t tag, PyObject *attrs);      /* a mapping's items as KeyValues */
int span(Buf *b, PyObject *s);                             /* a PlainSpan's Span body */

/* An ExportTraceServiceRequest's one ResourceSpans and its ScopeSpans, left open for spans (field 2 of
 * ScopeSpans each); `open` keeps where the two begin, for close_request(). */
int open_request(Buf *b, PyObject *resource, PyObject *scope, Py_ssize_t open[2]);
int close_request(Buf *b, const Py_ssize_t open[2]);

/* _otlp_traces.c */
int traces_init(void);
PyObject *encode_traces(PyObject *self, PyObject *args);
extern const char encode_traces_doc[];

#endif
