/* The critical path's pieces as JSON text, in one pass (see opscope.analysis.critical.path).

   dumps(rank, label, name, event_id, start_ns, dur_ns, labels, names[, evidence]) -> bytes

   rank, label, name, event_id, start_ns, dur_ns: int64 buffers of one length (one piece each;
   label indexes ``labels``, name indexes ``names`` or is -1 for null, event_id -1 for null);
   labels, names: tuples of bytes, each already a JSON string literal (quotes and escapes
   included).  Writes ``[{"rank":R,"label":L,"name":N,"event_id":E,"start_ns":S,"dur_us":D},...]``
   with ``dur_us`` = dur_ns / 1000 written as Python's repr of round(dur_ns / 1000, 3) writes it
   (shortest form, at least one decimal: 12.0, 0.001, 1234.5), which is exact for an integer
   count of ns below 10**15 ns.
   evidence, optional: a tuple (before_id, after_id, thread, threads): three int64 buffers of the
   same length and a tuple of bytes (JSON string literals); a piece whose thread is >= 0 gets
   ``,"evidence":{"thread":T,"before_event_id":B,"after_event_id":A}`` after ``dur_us`` (B, A
   null where -1). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t len, cap;
} Out;

static int grow(Out *o, size_t need) {
    if (o->len + need <= o->cap) return 0;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + need) cap *= 2;
    char *b = PyMem_Realloc(o->buf, cap);
    if (!b) return -1;
    o->buf = b;
    o->cap = cap;
    return 0;
}

static void put(Out *o, const char *s, size_t n) {
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void put_int(Out *o, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t u;
    if (v < 0) {
        o->buf[o->len++] = '-';
        u = (uint64_t)(-(v + 1)) + 1;
    } else {
        u = (uint64_t)v;
    }
    do {
        tmp[n++] = (char)('0' + (u % 10));
        u /= 10;
    } while (u);
    while (n) o->buf[o->len++] = tmp[--n];
}

static void put_us(Out *o, int64_t ns) {
    if (ns < 0) {
        o->buf[o->len++] = '-';
        ns = -ns;
    }
    put_int(o, ns / 1000);
    int frac = (int)(ns % 1000);
    o->buf[o->len++] = '.';
    if (frac == 0) {
        o->buf[o->len++] = '0';
        return;
    }
    char d[3] = {(char)('0' + frac / 100), (char)('0' + (frac / 10) % 10), (char)('0' + frac % 10)};
    int n = 3;
    while (n > 1 && d[n - 1] == '0') n--;
    put(o, d, (size_t)n);
}

static PyObject *dumps(PyObject *self, PyObject *args) {
    Py_buffer b[9];
    int nbuf = 6;
    PyObject *labels, *names, *evidence = NULL, *threads = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*O!O!|O!", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                          &PyTuple_Type, &labels, &PyTuple_Type, &names, &PyTuple_Type,
                          &evidence))
        return NULL;
    PyObject *result = NULL;
    Out o = {NULL, 0, 0};
    Py_ssize_t n = b[0].len / 8;
    if (evidence) {
        if (PyTuple_GET_SIZE(evidence) != 4 ||
            !PyTuple_Check(threads = PyTuple_GET_ITEM(evidence, 3))) {
            PyErr_SetString(PyExc_ValueError, "dumps: evidence is (before, after, thread, threads)");
            goto done;
        }
        for (int i = 0; i < 3; i++) {
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(evidence, i), &b[6 + i], PyBUF_SIMPLE) < 0)
                goto done;
            nbuf++;
        }
    }
    for (int i = 1; i < nbuf; i++) {
        if (b[i].len != b[0].len) {
            PyErr_SetString(PyExc_ValueError, "dumps: columns of unequal lengths");
            goto done;
        }
    }
    const int64_t *rank = b[0].buf, *label = b[1].buf, *name = b[2].buf, *eid = b[3].buf,
                  *start = b[4].buf, *dur = b[5].buf;
    const int64_t *ev_before = evidence ? b[6].buf : NULL, *ev_after = evidence ? b[7].buf : NULL,
                  *ev_thread = evidence ? b[8].buf : NULL;
    Py_ssize_t nl = PyTuple_GET_SIZE(labels), nn = PyTuple_GET_SIZE(names);
    Py_ssize_t nt = threads ? PyTuple_GET_SIZE(threads) : 0;
    if (grow(&o, 2)) goto nomem;
    o.buf[o.len++] = '[';
    for (Py_ssize_t i = 0; i < n; i++) {
        if (label[i] < 0 || label[i] >= nl || name[i] >= nn) {
            PyErr_SetString(PyExc_ValueError, "dumps: a label or name out of range");
            goto done;
        }
        PyObject *lb = PyTuple_GET_ITEM(labels, label[i]);
        PyObject *nm = name[i] >= 0 ? PyTuple_GET_ITEM(names, name[i]) : NULL;
        if (!PyBytes_Check(lb) || (nm && !PyBytes_Check(nm))) {
            PyErr_SetString(PyExc_TypeError, "dumps: labels and names must be bytes");
            goto done;
        }
        size_t ll = (size_t)PyBytes_GET_SIZE(lb), nlen = nm ? (size_t)PyBytes_GET_SIZE(nm) : 4;
        if (grow(&o, 160 + ll + nlen)) goto nomem;
        if (i) o.buf[o.len++] = ',';
        put(&o, "{\"rank\":", 8);
        put_int(&o, rank[i]);
        put(&o, ",\"label\":", 9);
        put(&o, PyBytes_AS_STRING(lb), ll);
        put(&o, ",\"name\":", 8);
        if (nm) put(&o, PyBytes_AS_STRING(nm), nlen);
        else put(&o, "null", 4);
        put(&o, ",\"event_id\":", 12);
        if (eid[i] >= 0) put_int(&o, eid[i]);
        else put(&o, "null", 4);
        put(&o, ",\"start_ns\":", 12);
        put_int(&o, start[i]);
        put(&o, ",\"dur_us\":", 10);
        put_us(&o, dur[i]);
        if (ev_thread && ev_thread[i] >= 0) {
            if (ev_thread[i] >= nt || !PyBytes_Check(PyTuple_GET_ITEM(threads, ev_thread[i]))) {
                PyErr_SetString(PyExc_ValueError, "dumps: a thread out of range");
                goto done;
            }
            PyObject *th = PyTuple_GET_ITEM(threads, ev_thread[i]);
            size_t tl = (size_t)PyBytes_GET_SIZE(th);
            if (grow(&o, 128 + tl)) goto nomem;
            put(&o, ",\"evidence\":{\"thread\":", 22);
            put(&o, PyBytes_AS_STRING(th), tl);
            put(&o, ",\"before_event_id\":", 19);
            if (ev_before[i] >= 0) put_int(&o, ev_before[i]);
            else put(&o, "null", 4);
            put(&o, ",\"after_event_id\":", 18);
            if (ev_after[i] >= 0) put_int(&o, ev_after[i]);
            else put(&o, "null", 4);
            o.buf[o.len++] = '}';
        }
        o.buf[o.len++] = '}';
    }
    if (grow(&o, 1)) goto nomem;
    o.buf[o.len++] = ']';
    result = PyBytes_FromStringAndSize(o.buf, (Py_ssize_t)o.len);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    PyMem_Free(o.buf);
    for (int i = 0; i < nbuf; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"dumps", dumps, METH_VARARGS, "dumps(rank, label, name, event_id, start_ns, dur_ns, labels, names) -> JSON bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pieces", "The critical path's pieces as JSON text.", -1, methods,
};

PyMODINIT_FUNC PyInit__pieces(void) { return PyModule_Create(&module); }
