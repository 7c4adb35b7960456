/* Our own JSON records into Arrow buffers, outside the GIL: the fast path of ingest/codec/to_arrow.py.
 *
 * The emitter writes every record with the same encoder, so the records a batch holds are JSON
 * objects of a known shape. This decoder reads them against the storage schema (a tree of
 * bool, int64, double, string, timestamp[us], struct and list nodes) straight into Arrow's
 * buffers (validity bitmaps, offsets, values) and returns them for pyarrow's Array.from_buffers.
 *
 * It accepts less than Arrow's JSON reader, never more: anything it does not handle exactly as
 * Arrow would (an unknown or repeated key, a type mismatch, a number or timestamp in an unusual
 * form, an invalid string) makes decode() return None, and the caller parses the batch with
 * Arrow's reader instead, which stores what it can and names what it refuses. Numbers are read
 * exactly: a mantissa of up to 2^53 scaled by an exact power of ten is one correctly rounded
 * operation, anything else goes through strtod_l in the C locale.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strtod_l, newlocale */
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { T_BOOL, T_INT64, T_DOUBLE, T_STRING, T_TIMESTAMP, T_STRUCT, T_LIST };
enum { OK = 0, MISMATCH = -1, NOMEM = -2 };
/* A node's flags (the contract's part that belongs to a value's place: ingest/codec/contract.py). */
enum { F_REQUIRED = 1, F_NOT_NULL = 2 }; /* the key must be there; its value may not be null */
#define MAX_FIELDS 64
#define MAX_DEPTH 32

typedef struct {
    uint8_t *p;
    size_t len, cap;
} Buf;

typedef struct Node {
    int type, flags;
    const char *name;
    Py_ssize_t name_len;
    int nchild;
    struct Node *child;
    Buf valid, data, offsets; /* validity bitmap; values (bits for bool); int32 offsets */
    int64_t length, nulls;
} Node;

typedef struct {
    const uint8_t *p, *end;
    int depth;
} Cursor;

static locale_t c_locale;
static uint8_t PLAIN[256]; /* bytes a string copies as they are: printable ASCII but '"' and '\\' */

/* -- buffers ------------------------------------------------------------------------------- */

static int grow(Buf *b, size_t more) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return NOMEM;
    b->p = p;
    b->cap = cap;
    return OK;
}

static inline int reserve(Buf *b, size_t more) {
    return __builtin_expect(b->len + more <= b->cap, 1) ? OK : grow(b, more);
}

static inline int put(Buf *b, const void *src, size_t n) {
    if (reserve(b, n)) return NOMEM;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return OK;
}

static inline int put_bit(Buf *b, int64_t index, int bit) { /* bit ``index`` of a bitmap */
    size_t byte = (size_t)(index >> 3);
    if (byte >= b->len) {
        if (reserve(b, 1)) return NOMEM;
        b->p[b->len++] = 0;
    }
    if (bit) b->p[byte] |= (uint8_t)(1u << (index & 7));
    return OK;
}

static inline int put_offset(Buf *b, size_t value) {
    if (value > INT32_MAX) return MISMATCH; /* Arrow's reader would need large types: let it decide */
    int32_t v = (int32_t)value;
    return put(b, &v, sizeof v);
}

/* Close one slot of ``n``: valid or not. Offsets and values are appended by the caller. */
static inline int finish_slot(Node *n, int valid) {
    if (put_bit(&n->valid, n->length, valid)) return NOMEM;
    if (!valid) n->nulls++;
    n->length++;
    return OK;
}

static int append_null(Node *n) {
    static const uint8_t zeros[8] = {0};
    int rc = OK;
    switch (n->type) {
    case T_BOOL: rc = put_bit(&n->data, n->length, 0); break;
    case T_INT64: case T_DOUBLE: case T_TIMESTAMP: rc = put(&n->data, zeros, 8); break;
    case T_STRING: rc = put_offset(&n->offsets, n->data.len); break;
    case T_LIST: rc = put_offset(&n->offsets, (size_t)n->child[0].length); break;
    case T_STRUCT:
        for (int i = 0; i < n->nchild && rc == OK; i++) rc = append_null(&n->child[i]);
        break;
    }
    return rc ? rc : finish_slot(n, 0);
}

/* -- scanning ------------------------------------------------------------------------------ */

static inline void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

static inline int same(const char *name, const uint8_t *key, Py_ssize_t n) { /* short keys: no call */
    for (Py_ssize_t i = 0; i < n; i++)
        if ((uint8_t)name[i] != key[i]) return 0;
    return 1;
}

static inline int literal(Cursor *c, const char *word, Py_ssize_t n) {
    if (c->end - c->p < n || !same(word, c->p, n)) return 0;
    c->p += n;
    return 1;
}

static int hex4(const uint8_t *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
        else return MISMATCH;
    }
    *out = v;
    return OK;
}

static int put_utf8(Buf *b, uint32_t cp) {
    uint8_t s[4];
    size_t n;
    if (cp < 0x80) { s[0] = (uint8_t)cp; n = 1; }
    else if (cp < 0x800) { s[0] = 0xC0 | (cp >> 6); s[1] = 0x80 | (cp & 0x3F); n = 2; }
    else if (cp < 0x10000) {
        s[0] = 0xE0 | (cp >> 12); s[1] = 0x80 | ((cp >> 6) & 0x3F); s[2] = 0x80 | (cp & 0x3F); n = 3;
    } else {
        s[0] = 0xF0 | (cp >> 18); s[1] = 0x80 | ((cp >> 12) & 0x3F);
        s[2] = 0x80 | ((cp >> 6) & 0x3F); s[3] = 0x80 | (cp & 0x3F); n = 4;
    }
    return put(b, s, n);
}

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0 (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF). */
static size_t utf8_len(const uint8_t *p, const uint8_t *end) {
    uint8_t a = p[0];
    if (a >= 0xC2 && a <= 0xDF) return (end - p >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    if (a >= 0xE0 && a <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (a == 0xE0 && p[1] < 0xA0) return 0;
        if (a == 0xED && p[1] > 0x9F) return 0;
        return 3;
    }
    if (a >= 0xF0 && a <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (a == 0xF0 && p[1] < 0x90) return 0;
        if (a == 0xF4 && p[1] > 0x8F) return 0;
        return 4;
    }
    return 0;
}

/* A JSON string (the cursor is on its opening quote), unescaped into ``out``. */
static int read_string(Cursor *c, Buf *out) {
    const uint8_t *p = c->p + 1, *end = c->end;
    for (;;) {
        const uint8_t *run = p;
        while (p < end && PLAIN[*p]) p++;
        if (p > run && put(out, run, (size_t)(p - run))) return NOMEM;
        if (p >= end || *p < 0x20) return MISMATCH;
        if (*p == '"') {
            c->p = p + 1;
            return OK;
        }
        if (*p >= 0x80) {
            size_t n = utf8_len(p, end);
            if (!n) return MISMATCH;
            if (put(out, p, n)) return NOMEM;
            p += n;
            continue;
        }
        /* a backslash */
        if (end - p < 2) return MISMATCH;
        uint8_t e = p[1], ch;
        p += 2;
        switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (end - p < 4 || hex4(p, &cp)) return MISMATCH;
            p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return MISMATCH;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo)) return MISMATCH;
                if (lo < 0xDC00 || lo > 0xDFFF) return MISMATCH;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            if (put_utf8(out, cp)) return NOMEM;
            continue;
        }
        default: return MISMATCH;
        }
        if (put(out, &ch, 1)) return NOMEM;
    }
}

/* The closing quote of the string the cursor is on, if the string has no escapes; else NULL. */
static inline const uint8_t *plain_string_end(const Cursor *c) {
    const uint8_t *q = c->p + 1;
    while (q < c->end && *q != '"' && *q != '\\') q++;
    return q < c->end && *q == '"' ? q : NULL;
}

/* -- numbers ------------------------------------------------------------------------------- */

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A JSON number: an int64 (no fraction, no exponent) when ``want_int``, else a double. */
static int read_number(Cursor *c, int want_int, int64_t *iv, double *dv) {
    const uint8_t *start = c->p, *p = c->p, *end = c->end;
    int neg = 0, digits = 0, exp10 = 0;
    uint64_t mant = 0;
    if (p < end && *p == '-') { neg = 1; p++; }
    if (p >= end || *p < '0' || *p > '9') return MISMATCH;
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9') return MISMATCH; /* leading zero */
    } else {
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (digits < 19) { mant = mant * 10 + (uint64_t)(*p - '0'); digits++; }
            else { digits++; exp10++; }
        }
    }
    int is_int = 1;
    if (p < end && *p == '.') {
        is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return MISMATCH;
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (mant == 0 && *p == '0') { exp10--; continue; } /* leading zeros of a fraction */
            if (digits < 19) { mant = mant * 10 + (uint64_t)(*p - '0'); digits++; exp10--; }
            else digits++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        int eneg = 0, e = 0;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p >= end || *p < '0' || *p > '9') return MISMATCH;
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            if (e < 100000) e = e * 10 + (*p - '0');
        exp10 += eneg ? -e : e;
    }
    c->p = p;
    if (want_int) {
        if (!is_int || digits > 19) return MISMATCH;
        if (neg ? mant > (uint64_t)INT64_MAX + 1 : mant > (uint64_t)INT64_MAX) return MISMATCH;
        *iv = neg ? (int64_t)(0 - mant) : (int64_t)mant;
        return OK;
    }
    if (digits <= 19 && mant <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
        double d = (double)mant;
        d = exp10 < 0 ? d / POW10[-exp10] : d * POW10[exp10];
        *dv = neg ? -d : d;
        return OK;
    }
    if (mant == 0 && digits <= 19) { /* zero with any exponent */
        *dv = neg ? -0.0 : 0.0;
        return OK;
    }
    char tmp[400];
    size_t n = (size_t)(p - start);
    if (n >= sizeof tmp) return MISMATCH;
    memcpy(tmp, start, n);
    tmp[n] = 0;
    char *stop;
    *dv = strtod_l(tmp, &stop, c_locale);
    return stop == tmp + n && isfinite(*dv) ? OK : MISMATCH; /* overflow: Arrow's reader decides */
}

/* -- timestamps ---------------------------------------------------------------------------- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) { /* H. Hinnant's algorithm */
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits_at(const uint8_t *p, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return MISMATCH;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return OK;
}

/* "YYYY-MM-DD[T ]hh:mm:ss[.f{1,6}][Z|+hh:mm|-hh:mm]" inside a string (no escapes), as µs since
 * the epoch in UTC. Other forms Arrow accepts (dates alone, minutes alone, nanoseconds, ...)
 * are left to Arrow's reader. */
static int read_timestamp(Cursor *c, int64_t *out) {
    const uint8_t *p = c->p + 1, *q = plain_string_end(c);
    if (!q) return MISMATCH;
    size_t n = (size_t)(q - p);
    int Y, M, D, h, m, s, us = 0, off = 0;
    if (n < 19 || p[4] != '-' || p[7] != '-' || (p[10] != 'T' && p[10] != ' ') || p[13] != ':' || p[16] != ':')
        return MISMATCH;
    if (digits_at(p, 4, &Y) || digits_at(p + 5, 2, &M) || digits_at(p + 8, 2, &D) || digits_at(p + 11, 2, &h) ||
        digits_at(p + 14, 2, &m) || digits_at(p + 17, 2, &s))
        return MISMATCH;
    static const int MDAYS[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
    if (M < 1 || M > 12 || D < 1 || D > MDAYS[M - 1] + (M == 2 && leap) || h > 23 || m > 59 || s > 59)
        return MISMATCH;
    size_t i = 19;
    if (i < n && p[i] == '.') {
        size_t f = ++i;
        while (i < n && p[i] >= '0' && p[i] <= '9') i++;
        size_t nf = i - f;
        if (nf < 1 || nf > 6) return MISMATCH;
        for (size_t k = 0; k < 6; k++) us = us * 10 + (k < nf ? p[f + k] - '0' : 0);
    }
    if (i < n && p[i] == 'Z') i++;
    else if (i < n && (p[i] == '+' || p[i] == '-')) {
        int oh, om;
        if (n - i != 6 || p[i + 3] != ':' || digits_at(p + i + 1, 2, &oh) || digits_at(p + i + 4, 2, &om))
            return MISMATCH;
        if (oh > 23 || om > 59) return MISMATCH;
        off = (p[i] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
        i += 6;
    }
    if (i != n) return MISMATCH;
    int64_t secs = days_from_civil(Y, (unsigned)M, (unsigned)D) * 86400 + h * 3600 + m * 60 + s - off;
    *out = secs * 1000000 + us;
    c->p = q + 1;
    return OK;
}

/* -- values -------------------------------------------------------------------------------- */

static int read_value(Cursor *c, Node *n);

/* On an opening bracket: step in; 1 when a first member or element follows, 0 at ``close``. */
static inline int open_container(Cursor *c, uint8_t close) {
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 0;
    }
    return 1;
}

/* After a member or element: 1 when a ',' says another follows, 0 at ``close``, else MISMATCH. */
static inline int more_follows(Cursor *c, uint8_t close) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        skip_ws(c);
        return 1;
    }
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 0;
    }
    return MISMATCH;
}

static int read_struct_body(Cursor *c, Node *n) { /* the cursor is on '{' */
    uint64_t seen = 0;
    int hint = 0, more = open_container(c, '}');
    while (more == 1) {
        if (c->p >= c->end || *c->p != '"') return MISMATCH;
        const uint8_t *key = c->p + 1, *q = plain_string_end(c);
        if (!q) return MISMATCH; /* keys with escapes are left to Arrow's reader */
        Py_ssize_t klen = q - key;
        int found = -1;
        for (int k = 0; k < n->nchild; k++) { /* the next field first: keys come in schema order */
            int i = hint + k < n->nchild ? hint + k : hint + k - n->nchild;
            if (n->child[i].name_len == klen && same(n->child[i].name, key, klen)) {
                found = i;
                break;
            }
        }
        if (found < 0 || (seen >> found) & 1) return MISMATCH; /* unknown or repeated key */
        seen |= 1ULL << found;
        hint = found + 1 < n->nchild ? found + 1 : 0;
        c->p = q + 1;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return MISMATCH;
        c->p++;
        skip_ws(c);
        int rc = read_value(c, &n->child[found]);
        if (rc) return rc;
        more = more_follows(c, '}');
    }
    if (more < 0) return MISMATCH;
    for (int i = 0; i < n->nchild; i++) { /* missing fields are null */
        if (!((seen >> i) & 1)) {
            if (n->child[i].flags & F_REQUIRED) return MISMATCH;
            int rc = append_null(&n->child[i]);
            if (rc) return rc;
        }
    }
    return OK;
}

static int read_list(Cursor *c, Node *n) { /* the cursor is on '[' */
    int more = open_container(c, ']');
    while (more == 1) {
        int rc = read_value(c, &n->child[0]);
        if (rc) return rc;
        more = more_follows(c, ']');
    }
    if (more < 0) return MISMATCH;
    return put_offset(&n->offsets, (size_t)n->child[0].length);
}

static int read_value(Cursor *c, Node *n) {
    if (c->p >= c->end) return MISMATCH;
    uint8_t ch = *c->p;
    if (ch == 'n') return !(n->flags & F_NOT_NULL) && literal(c, "null", 4) ? append_null(n) : MISMATCH;
    int rc;
    switch (n->type) {
    case T_BOOL:
        if (literal(c, "true", 4)) rc = put_bit(&n->data, n->length, 1);
        else if (literal(c, "false", 5)) rc = put_bit(&n->data, n->length, 0);
        else return MISMATCH;
        break;
    case T_INT64: {
        int64_t v;
        if (ch != '-' && (ch < '0' || ch > '9')) return MISMATCH;
        if ((rc = read_number(c, 1, &v, NULL))) return rc;
        rc = put(&n->data, &v, 8);
        break;
    }
    case T_DOUBLE: {
        double v;
        if (ch != '-' && (ch < '0' || ch > '9')) return MISMATCH;
        if ((rc = read_number(c, 0, NULL, &v))) return rc;
        rc = put(&n->data, &v, 8);
        break;
    }
    case T_TIMESTAMP: {
        int64_t v;
        if (ch != '"') return MISMATCH;
        if ((rc = read_timestamp(c, &v))) return rc;
        rc = put(&n->data, &v, 8);
        break;
    }
    case T_STRING:
        if (ch != '"') return MISMATCH;
        if ((rc = read_string(c, &n->data))) return rc;
        rc = put_offset(&n->offsets, n->data.len);
        break;
    case T_STRUCT:
        if (ch != '{' || ++c->depth > MAX_DEPTH) return MISMATCH;
        rc = read_struct_body(c, n);
        c->depth--;
        break;
    case T_LIST:
        if (ch != '[' || ++c->depth > MAX_DEPTH) return MISMATCH;
        rc = read_list(c, n);
        c->depth--;
        break;
    default:
        return MISMATCH;
    }
    return rc ? rc : finish_slot(n, 1);
}

/* -- the schema tree ------------------------------------------------------------------------ */

static void free_tree(Node *n) {
    for (int i = 0; i < n->nchild; i++) free_tree(&n->child[i]);
    free(n->child);
    free(n->valid.p);
    free(n->data.p);
    free(n->offsets.p);
}

/* spec: (type, name: bytes, children: tuple of specs[, flags]) */
static int build_tree(PyObject *spec, Node *n) {
    PyObject *children, *name;
    int type;
    memset(n, 0, sizeof *n);
    int flags = 0;
    if (!PyArg_ParseTuple(spec, "iSO!|i", &type, &name, &PyTuple_Type, &children, &flags)) return -1;
    n->type = type;
    n->flags = flags;
    n->name = PyBytes_AS_STRING(name);
    n->name_len = PyBytes_GET_SIZE(name);
    Py_ssize_t k = PyTuple_GET_SIZE(children);
    if (type < T_BOOL || type > T_LIST || (type == T_LIST && k != 1) || (type == T_STRUCT && k > MAX_FIELDS) ||
        (type < T_STRUCT && k != 0)) {
        PyErr_SetString(PyExc_ValueError, "unsupported schema node");
        return -1;
    }
    if (k) {
        n->child = calloc((size_t)k, sizeof(Node));
        if (!n->child) {
            PyErr_NoMemory();
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        n->nchild = (int)i + 1; /* so free_tree frees what was built */
        if (build_tree(PyTuple_GET_ITEM(children, i), &n->child[i])) return -1;
    }
    if ((type == T_STRING || type == T_LIST) && put_offset(&n->offsets, 0)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void free_capsule(PyObject *capsule) { free(PyCapsule_GetPointer(capsule, "ndjson_arrow.buffer")); }

/* (address, size, owner): the memory is handed over, freed when the owner capsule goes (pyarrow's
 * foreign_buffer keeps it as the buffer's base), so the values are never copied. */
static PyObject *hand_over(Buf *b) {
    if (!b->p && grow(b, 8)) return PyErr_NoMemory();
    PyObject *owner = PyCapsule_New(b->p, "ndjson_arrow.buffer", free_capsule);
    if (!owner) return NULL;
    PyObject *out = Py_BuildValue("(KnN)", (unsigned long long)(uintptr_t)b->p, (Py_ssize_t)b->len, owner);
    b->p = NULL; /* the capsule owns it now (and frees it even if building the tuple failed) */
    b->len = b->cap = 0;
    return out;
}

/* Appends (length, null_count, validity, offsets, values) of n and its descendants, pre-order. */
static int export_tree(Node *n, PyObject *out) {
    PyObject *valid = n->nulls ? hand_over(&n->valid) : Py_NewRef(Py_None);
    PyObject *offs = (n->type == T_STRING || n->type == T_LIST) ? hand_over(&n->offsets) : Py_NewRef(Py_None);
    PyObject *data = (n->type == T_STRUCT || n->type == T_LIST) ? Py_NewRef(Py_None) : hand_over(&n->data);
    PyObject *item = NULL;
    if (valid && offs && data) item = Py_BuildValue("(LLOOO)", (long long)n->length, (long long)n->nulls, valid, offs, data);
    Py_XDECREF(valid);
    Py_XDECREF(offs);
    Py_XDECREF(data);
    if (!item || PyList_Append(out, item)) {
        Py_XDECREF(item);
        return -1;
    }
    Py_DECREF(item);
    for (int i = 0; i < n->nchild; i++)
        if (export_tree(&n->child[i], out)) return -1;
    return 0;
}

/* -- the module ---------------------------------------------------------------------------- */

static int decode_all(Node *root, const uint8_t **ptrs, const Py_ssize_t *lens, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        Cursor c = {ptrs[i], ptrs[i] + lens[i], 0};
        skip_ws(&c);
        if (c.p >= c.end || *c.p != '{') return MISMATCH;
        int rc = read_struct_body(&c, root);
        if (rc) return rc;
        skip_ws(&c);
        if (c.p != c.end) return MISMATCH;
        root->length++;
    }
    return OK;
}

PyDoc_STRVAR(decode_doc,
             "decode(spec, payloads) -> list | None\n\n"
             "Decode JSON objects (a list of bytes) against spec, a (type, name, children[, flags]) tree\n"
             "whose root is the record's struct. Returns each node's (length, null_count, validity, offsets,\n"
             "values) in pre-order, each buffer as (address, size, owner) or None; or None when some payload\n"
             "is not in the exact form this decoder reads, or breaks a node's flags (REQUIRED: its key is\n"
             "missing; NOT_NULL: its value is null).");

static PyObject *decode(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *spec, *payloads;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &spec, &PyList_Type, &payloads)) return NULL;
    Node root;
    if (build_tree(spec, &root)) {
        free_tree(&root);
        return NULL;
    }
    if (root.type != T_STRUCT) {
        free_tree(&root);
        PyErr_SetString(PyExc_ValueError, "the root of spec must be a struct");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(payloads);
    PyObject **items = PyMem_Malloc(sizeof(PyObject *) * (size_t)(count ? count : 1));
    const uint8_t **ptrs = PyMem_Malloc(sizeof(uint8_t *) * (size_t)(count ? count : 1));
    Py_ssize_t *lens = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(count ? count : 1));
    PyObject *result = NULL;
    Py_ssize_t held = 0;
    if (!items || !ptrs || !lens) {
        PyErr_NoMemory();
        goto done;
    }
    for (; held < count; held++) { /* our own references: the bytes outlive the unlocked part */
        PyObject *item = PyList_GET_ITEM(payloads, held);
        if (!PyBytes_Check(item)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        items[held] = Py_NewRef(item);
        ptrs[held] = (const uint8_t *)PyBytes_AS_STRING(item);
        lens[held] = PyBytes_GET_SIZE(item);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_all(&root, ptrs, lens, count);
    Py_END_ALLOW_THREADS
    if (rc == NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == MISMATCH) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyList_New(0);
    if (result && export_tree(&root, result)) Py_CLEAR(result);
done:
    for (Py_ssize_t i = 0; i < held; i++) Py_DECREF(items[i]);
    PyMem_Free(items);
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    free_tree(&root);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ndjson_arrow", "Our own JSON records into Arrow buffers (see fast_decoder.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ndjson_arrow(void) {
    for (int b = 0x20; b < 0x80; b++) PLAIN[b] = b != '"' && b != '\\';
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (!c_locale) return PyErr_NoMemory();
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "BOOL", T_BOOL) || PyModule_AddIntConstant(m, "INT64", T_INT64) ||
        PyModule_AddIntConstant(m, "DOUBLE", T_DOUBLE) || PyModule_AddIntConstant(m, "STRING", T_STRING) ||
        PyModule_AddIntConstant(m, "TIMESTAMP", T_TIMESTAMP) || PyModule_AddIntConstant(m, "STRUCT", T_STRUCT) ||
        PyModule_AddIntConstant(m, "LIST", T_LIST) || PyModule_AddIntConstant(m, "MAX_FIELDS", MAX_FIELDS) ||
        PyModule_AddIntConstant(m, "REQUIRED", F_REQUIRED) || PyModule_AddIntConstant(m, "NOT_NULL", F_NOT_NULL)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
