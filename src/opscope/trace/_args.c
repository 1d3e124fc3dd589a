/*
 * opscope.trace._args: top-level values of compact `args` JSON texts, in one pass over the bytes.
 *
 * values(offsets, data, n, mask, keys) reads n texts (Arrow string layout: int32 offsets,
 * n + 1 of them, into data) and, for each key of `keys` (bytes, at most 8), cuts out the text
 * of its value at the top level of each object, where that text is provably what
 * orjson.dumps(orjson.loads(value)) writes:
 *   - lists (of lists) of unsigned integers, each 0 or [1-9][0-9]{0,18};
 *   - flat lists of strings with no escape and no control byte.
 * A row is "unsure" (status 1; its values are left empty for the caller's decoder) when it is
 * not such an object, or could read otherwise than this pass says:
 *   - not one valid JSON object, whitespace outside strings, a backslash anywhere, nesting
 *     deeper than 1000, a number with an exponent or of 309 bytes or more (a decoder may refuse
 *     it as infinite);
 *   - a wanted key twice, or a wanted value of another shape (null, numbers with a sign, a
 *     fraction or an exponent, mixed lists, objects);
 *   - any string token (a nested key, a value) equal to a wanted key other than the top-level
 *     key itself: a text search for the quoted key would then find more than this pass does.
 * Rows outside `mask` (uint8 per row, or None for all rows), and empty texts, are read (status
 * 0) with every value absent.
 *
 * Returns (status bytes, then per key: validity bitmap bytes, int32 offsets bytes, data bytes).
 * The pass holds no Python object and runs with the GIL released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 8
#define MAX_NEST 1000

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_put(Buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *q = (char *)realloc(b->p, cap);
        if (!q)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

typedef struct {
    const unsigned char *k[MAX_KEYS];
    size_t klen[MAX_KEYS];
    int nkeys;
} Keys;

/* A string token at *p (on its opening quote): *p moves past the closing quote.  -1: an escape
 * or a control byte inside (unsure), or the text ends first. */
static int skip_string(const unsigned char **p, const unsigned char *end) {
    const unsigned char *q = *p + 1;
    for (; q < end; q++) {
        unsigned c = *q;
        if (c == '"') {
            *p = q + 1;
            return 0;
        }
        if (c == '\\' || c < 0x20)
            return -1;
    }
    return -1;
}

static int is_wanted(const Keys *keys, const unsigned char *s, size_t len) {
    for (int i = 0; i < keys->nkeys; i++)
        if (keys->klen[i] == len && memcmp(keys->k[i], s, len) == 0)
            return i;
    return -1;
}

/* A string token at *p that must not spell a wanted key: -1 when it does (or is unsure). */
static int plain_token(const unsigned char **p, const unsigned char *end, const Keys *keys) {
    const unsigned char *s = *p + 1;
    if (skip_string(p, end))
        return -1;
    return is_wanted(keys, s, (size_t)(*p - 1 - s)) >= 0 ? -1 : 0;
}

static int is_digit(unsigned c) { return c >= '0' && c <= '9'; }

/* A number or a literal, strictly as JSON writes it, with no exponent and under 309 bytes (so
 * that a decoder reads it as a finite number); -1: unsure. */
static int skip_scalar(const unsigned char **p, const unsigned char *end) {
    const unsigned char *q = *p;
    static const char *const words[3] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(words[i]);
        if ((size_t)(end - q) >= len && memcmp(q, words[i], len) == 0) {
            *p = q + len;
            return 0;
        }
    }
    if (q < end && *q == '-')
        q++;
    if (q >= end || !is_digit(*q))
        return -1;
    if (*q == '0')
        q++;
    else
        while (q < end && is_digit(*q))
            q++;
    if (q < end && *q == '.') {
        q++;
        if (q >= end || !is_digit(*q))
            return -1;
        while (q < end && is_digit(*q))
            q++;
    }
    if (q - *p >= 309 || (q < end && (*q == 'e' || *q == 'E')))
        return -1;
    *p = q;
    return 0;
}

/* Any value at *p, validated and skipped (its string tokens checked with plain_token);
 * -1: unsure. */
static int skip_value(const unsigned char **p, const unsigned char *end, const Keys *keys,
                      int depth) {
    const unsigned char *q = *p;
    if (q >= end)
        return -1;
    if (*q == '"') {
        if (plain_token(&q, end, keys))
            return -1;
        *p = q;
        return 0;
    }
    if (*q != '[' && *q != '{')
        return skip_scalar(p, end);
    if (depth >= MAX_NEST)
        return -1;
    unsigned char close = *q == '[' ? ']' : '}';
    int object = close == '}';
    q++;
    if (q < end && *q == close) {
        *p = q + 1;
        return 0;
    }
    for (;;) {
        if (object) {
            if (q >= end || *q != '"' || plain_token(&q, end, keys))
                return -1;
            if (q >= end || *q != ':')
                return -1;
            q++;
        }
        if (skip_value(&q, end, keys, depth + 1))
            return -1;
        if (q >= end)
            return -1;
        if (*q == ',') {
            q++;
            continue;
        }
        if (*q == close) {
            *p = q + 1;
            return 0;
        }
        return -1;
    }
}

/* An unsigned integer list (of lists), strictly: [] or [elem(,elem)*]. */
static int int_list(const unsigned char **p, const unsigned char *end, int depth) {
    const unsigned char *q = *p;
    if (q >= end || *q != '[' || depth > MAX_NEST)
        return -1;
    q++;
    if (q < end && *q == ']') {
        *p = q + 1;
        return 0;
    }
    for (;;) {
        if (q >= end)
            return -1;
        if (*q == '[') {
            if (int_list(&q, end, depth + 1))
                return -1;
        } else if (*q == '0') {
            q++;
            if (q < end && *q >= '0' && *q <= '9')
                return -1;
        } else if (*q >= '1' && *q <= '9') {
            const unsigned char *d = q;
            while (q < end && *q >= '0' && *q <= '9')
                q++;
            if (q - d > 19)
                return -1;
        } else {
            return -1;
        }
        if (q >= end)
            return -1;
        if (*q == ',') {
            q++;
            continue;
        }
        if (*q == ']') {
            *p = q + 1;
            return 0;
        }
        return -1;
    }
}

/* A flat list of plain strings: [] or ["..."(,"...")*]. */
static int string_list(const unsigned char **p, const unsigned char *end, const Keys *keys) {
    const unsigned char *q = *p;
    if (q >= end || *q != '[')
        return -1;
    q++;
    if (q < end && *q == ']') {
        *p = q + 1;
        return 0;
    }
    for (;;) {
        if (q >= end || *q != '"' || plain_token(&q, end, keys))
            return -1;
        if (q >= end)
            return -1;
        if (*q == ',') {
            q++;
            continue;
        }
        if (*q == ']') {
            *p = q + 1;
            return 0;
        }
        return -1;
    }
}

/* One text: 0 read (spans set for the keys found), 1 unsure. */
static int read_text(const unsigned char *t, const unsigned char *end, const Keys *keys,
                     const unsigned char **vs, const unsigned char **ve) {
    for (int i = 0; i < keys->nkeys; i++)
        vs[i] = ve[i] = NULL;
    if (t == end)
        return 0;
    const unsigned char *p = t;
    if (*p != '{')
        return 1;
    p++;
    if (p < end && *p == '}')
        return p + 1 == end ? 0 : 1;
    for (;;) {
        if (p >= end || *p != '"')
            return 1;
        const unsigned char *k = p + 1;
        if (skip_string(&p, end))
            return 1;
        int w = is_wanted(keys, k, (size_t)(p - 1 - k));
        if (p >= end || *p != ':')
            return 1;
        p++;
        const unsigned char *v = p;
        if (w >= 0) {
            if (vs[w])
                return 1; /* twice: the last one wins in a decoder */
            const unsigned char *q = p;
            if (q < end && *q == '[' && q + 1 < end && q[1] == '"') {
                if (string_list(&q, end, keys))
                    return 1;
            } else if (int_list(&q, end, 0)) {
                return 1;
            }
            vs[w] = v;
            ve[w] = q;
            p = q;
        } else if (skip_value(&p, end, keys, 1)) {
            return 1;
        }
        if (p >= end)
            return 1;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == '}')
            return p + 1 == end ? 0 : 1;
        return 1;
    }
}

typedef struct {
    Buf valid[MAX_KEYS], offs[MAX_KEYS], data[MAX_KEYS];
} Out;

static void out_free(Out *o, int nkeys) {
    for (int i = 0; i < nkeys; i++) {
        free(o->valid[i].p);
        free(o->offs[i].p);
        free(o->data[i].p);
    }
}

static int run(const int32_t *offsets, const unsigned char *data, Py_ssize_t n,
               const unsigned char *mask, const Keys *keys, unsigned char *status, Out *o) {
    int nk = keys->nkeys;
    size_t nbytes = (size_t)(n + 7) / 8;
    for (int i = 0; i < nk; i++) {
        int32_t zero = 0;
        if (buf_put(&o->offs[i], &zero, sizeof zero))
            return -1;
        o->valid[i].p = (char *)calloc(nbytes ? nbytes : 1, 1);
        if (!o->valid[i].p)
            return -1;
        o->valid[i].len = o->valid[i].cap = nbytes;
    }
    const unsigned char *vs[MAX_KEYS], *ve[MAX_KEYS];
    for (Py_ssize_t r = 0; r < n; r++) {
        int st = 0;
        for (int i = 0; i < nk; i++)
            vs[i] = ve[i] = NULL;
        if (!mask || mask[r])
            st = read_text(data + offsets[r], data + offsets[r + 1], keys, vs, ve);
        status[r] = (unsigned char)st;
        for (int i = 0; i < nk; i++) {
            if (!st && vs[i]) {
                if (buf_put(&o->data[i], vs[i], (size_t)(ve[i] - vs[i])))
                    return -1;
                o->valid[i].p[r >> 3] |= (char)(1u << (r & 7));
            }
            if (o->data[i].len > INT32_MAX)
                return -1;
            int32_t end = (int32_t)o->data[i].len;
            if (buf_put(&o->offs[i], &end, sizeof end))
                return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(values_doc,
             "values(offsets, data, n, mask, keys) -> tuple | None\n\n"
             "Top-level values of n compact JSON object texts (int32 offsets into data; mask: "
             "uint8 per row or None; keys: tuple of bytes, at most 8) -> (status, then per "
             "key validity bitmap, int32 offsets, data) as bytes; status 1 marks the rows a "
             "decoder must read.  None when memory runs out or a column passes 2 GiB.");

static PyObject *values(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer ob, db, mb;
    Py_ssize_t n;
    PyObject *mask_obj, *key_tuple;
    if (!PyArg_ParseTuple(args, "y*y*nOO!", &ob, &db, &n, &mask_obj, &PyTuple_Type, &key_tuple))
        return NULL;
    PyObject *result = NULL;
    int have_mask = mask_obj != Py_None;
    Keys keys;
    memset(&keys, 0, sizeof keys);
    Out o;
    memset(&o, 0, sizeof o);
    unsigned char *status = NULL;
    if (have_mask && PyObject_GetBuffer(mask_obj, &mb, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&ob);
        PyBuffer_Release(&db);
        return NULL;
    }
    Py_ssize_t nk = PyTuple_GET_SIZE(key_tuple);
    if (n < 0 || ob.len < (n + 1) * (Py_ssize_t)sizeof(int32_t) || nk > MAX_KEYS ||
        (have_mask && mb.len < n)) {
        PyErr_SetString(PyExc_ValueError, "values: buffers too short, or more than 8 keys");
        goto done;
    }
    keys.nkeys = (int)nk;
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *k = PyTuple_GET_ITEM(key_tuple, i);
        if (!PyBytes_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "values: keys must be bytes");
            goto done;
        }
        keys.k[i] = (const unsigned char *)PyBytes_AS_STRING(k);
        keys.klen[i] = (size_t)PyBytes_GET_SIZE(k);
    }
    const int32_t *offsets = (const int32_t *)ob.buf;
    for (Py_ssize_t r = 0; r < n; r++)
        if (offsets[r] < 0 || offsets[r + 1] < offsets[r] || offsets[r + 1] > db.len) {
            PyErr_SetString(PyExc_ValueError, "values: offsets outside the data");
            goto done;
        }
    status = (unsigned char *)malloc(n ? (size_t)n : 1);
    if (!status) {
        PyErr_NoMemory();
        goto done;
    }
    int r;
    const unsigned char *mask = have_mask ? (const unsigned char *)mb.buf : NULL;
    Py_BEGIN_ALLOW_THREADS r = run(offsets, (const unsigned char *)db.buf, n, mask, &keys, status, &o);
    Py_END_ALLOW_THREADS if (r) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = PyTuple_New(1 + 3 * nk);
    if (!result)
        goto done;
    PyObject *item = PyBytes_FromStringAndSize((const char *)status, n);
    if (!item)
        goto fail;
    PyTuple_SET_ITEM(result, 0, item);
    for (Py_ssize_t i = 0; i < nk; i++) {
        Buf *bufs[3] = {&o.valid[i], &o.offs[i], &o.data[i]};
        for (int j = 0; j < 3; j++) {
            item = PyBytes_FromStringAndSize(bufs[j]->p ? bufs[j]->p : "", (Py_ssize_t)bufs[j]->len);
            if (!item)
                goto fail;
            PyTuple_SET_ITEM(result, 1 + 3 * i + j, item);
        }
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    free(status);
    out_free(&o, keys.nkeys);
    if (have_mask)
        PyBuffer_Release(&mb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&db);
    return result;
}

static PyMethodDef methods[] = {
    {"values", values, METH_VARARGS, values_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_args",
    "Top-level values of compact args JSON texts (see opscope.trace.native.top_values).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__args(void) { return PyModule_Create(&module); }
