/* The host threads' chain edges of the critical path's graph, in one pass
   (opscope.analysis.critical.chains has the NumPy twin and the rules in words).

   chains(order, hrows, rowi, rowb, codes, out_src, out_dst, out_w, out_label, out_attr,
          out_kind) -> int

   order: int64 [2H], the host rows' starts (0..H-1) and ends (H..2H-1) in call order;
   hrows: int64 [H], the row of each host node;
   rowi: a tuple of six int64 buffers of the trace's N rows: thread, start, end, parent (-1
   none), awaited_end and resume_after (-1 none);
   rowb: a tuple of three bool buffers of N rows: blocking, host_comm, data;
   codes: int8 [7]: the labels CPU, DATA, COMM, SYNC, NONE and the edge kinds THREAD, RESUME;
   out_*: writable buffers of 2H - 1 (int64: src, dst, w, attr; int8: label, kind).
   Node k of order is node order[k] (a host row's start node is its place in hrows, its end
   node H after it).  Each pair of neighbours in order on one thread is an edge from the first
   to the second, attributed to the row running between them: the first when it starts, the
   second when it ends, else the first's parent; a gap between two top-level calls is
   attributed to none and weighs nothing.  A blocking call's time before the device work it
   waited for ended (awaited_end) and a thread's time before a CPU collective resumed it
   (resume_after) weigh nothing.  Returns the number of edges written.
   The pass holds no Python object and runs with the GIL released. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static Py_ssize_t run(const int64_t *order, Py_ssize_t H2, const int64_t *hrows, Py_ssize_t H,
                      const int64_t *const *ri, const uint8_t *const *rb, const int8_t *codes,
                      int64_t *osrc, int64_t *odst, int64_t *ow, int8_t *olab, int64_t *oatt,
                      int8_t *okind) {
    const int64_t *thread = ri[0], *start = ri[1], *end = ri[2], *parent = ri[3];
    const int64_t *awaited = ri[4], *resume = ri[5];
    const uint8_t *blocking = rb[0], *comm = rb[1], *data = rb[2];
    const int8_t CPU = codes[0], DATA = codes[1], COMM = codes[2], SYNC = codes[3];
    const int8_t NONE = codes[4], THREAD = codes[5], RESUME = codes[6];
    Py_ssize_t m = 0;
    for (Py_ssize_t k = 0; k + 1 < H2; k++) {
        int64_t na = order[k], nb = order[k + 1];
        int ea = na >= H, eb = nb >= H;
        int64_t ra = hrows[ea ? na - H : na], rb_ = hrows[eb ? nb - H : nb];
        if (thread[ra] != thread[rb_]) continue;
        int64_t ta = ea ? end[ra] : start[ra], tb = eb ? end[rb_] : start[rb_];
        int64_t att = !ea ? ra : (eb ? rb_ : parent[ra]);
        int64_t w = tb - ta;
        int8_t label = CPU, kind = THREAD;
        if (att < 0) { /* a gap between two top-level calls */
            w = 0;
            label = NONE;
            att = -1;
        } else {
            if (awaited[att] >= 0) w = max64(0, tb - max64(ta, awaited[att]));
            if (data[att]) label = DATA;
            if (comm[att]) label = COMM;
            if (blocking[att]) label = SYNC;
        }
        if (!eb && resume[rb_] >= 0) {
            w = max64(0, tb - max64(ta, resume[rb_]));
            kind = RESUME;
        }
        osrc[m] = na;
        odst[m] = nb;
        ow[m] = w < 0 ? 0 : w;
        olab[m] = label;
        oatt[m] = att;
        okind[m] = kind;
        m++;
    }
    return m;
}

static PyObject *chains(PyObject *self, PyObject *args) {
    Py_buffer ob, hb, cb, sb, db, wb, lb, ab, kb;
    PyObject *rowi, *rowb;
    Py_buffer ib[6], bb[3];
    int ni = 0, nb = 0;
    if (!PyArg_ParseTuple(args, "y*y*O!O!y*w*w*w*w*w*w*", &ob, &hb, &PyTuple_Type, &rowi,
                          &PyTuple_Type, &rowb, &cb, &sb, &db, &wb, &lb, &ab, &kb))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t H2 = ob.len / 8, H = hb.len / 8, N = -1, m = 0;
    const int64_t *ri[6];
    const uint8_t *rbp[3];
    if (PyTuple_GET_SIZE(rowi) != 6 || PyTuple_GET_SIZE(rowb) != 3) {
        PyErr_SetString(PyExc_ValueError, "chains: six int64 and three bool row buffers");
        goto done;
    }
    for (; ni < 6; ni++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(rowi, ni), &ib[ni], PyBUF_SIMPLE) < 0) goto done;
        Py_ssize_t n = ib[ni].len / 8;
        if (N >= 0 && n != N) {
            ni++;
            PyErr_SetString(PyExc_ValueError, "chains: row buffers of unequal lengths");
            goto done;
        }
        N = n;
        ri[ni] = (const int64_t *)ib[ni].buf;
    }
    for (; nb < 3; nb++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(rowb, nb), &bb[nb], PyBUF_SIMPLE) < 0) goto done;
        if (bb[nb].len != N) {
            nb++;
            PyErr_SetString(PyExc_ValueError, "chains: row buffers of unequal lengths");
            goto done;
        }
        rbp[nb] = (const uint8_t *)bb[nb].buf;
    }
    if (H2 != 2 * H || cb.len != 7 || sb.len < 8 * (H2 > 0 ? H2 - 1 : 0) || db.len < sb.len ||
        wb.len < sb.len || ab.len < sb.len || lb.len < sb.len / 8 || kb.len < sb.len / 8) {
        PyErr_SetString(PyExc_ValueError, "chains: buffers of the wrong lengths");
        goto done;
    }
    const int64_t *order = (const int64_t *)ob.buf, *hrows = (const int64_t *)hb.buf;
    for (Py_ssize_t k = 0; k < H2; k++)
        if (order[k] < 0 || order[k] >= H2) {
            PyErr_SetString(PyExc_ValueError, "chains: an order entry out of range");
            goto done;
        }
    for (Py_ssize_t k = 0; k < H; k++)
        if (hrows[k] < 0 || hrows[k] >= N) {
            PyErr_SetString(PyExc_ValueError, "chains: a host row out of range");
            goto done;
        }
    for (Py_ssize_t r = 0; r < N; r++) /* parents and the awaited rows index the rows */
        if (ri[3][r] >= N) {
            PyErr_SetString(PyExc_ValueError, "chains: a parent row out of range");
            goto done;
        }
    Py_BEGIN_ALLOW_THREADS m = run(order, H2, hrows, H, ri, rbp, (const int8_t *)cb.buf,
                                   (int64_t *)sb.buf, (int64_t *)db.buf, (int64_t *)wb.buf,
                                   (int8_t *)lb.buf, (int64_t *)ab.buf, (int8_t *)kb.buf);
    Py_END_ALLOW_THREADS result = PyLong_FromSsize_t(m);
done:
    for (int i = 0; i < ni; i++) PyBuffer_Release(&ib[i]);
    for (int i = 0; i < nb; i++) PyBuffer_Release(&bb[i]);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&hb);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&wb);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&ab);
    PyBuffer_Release(&kb);
    return result;
}

static PyMethodDef methods[] = {
    {"chains", chains, METH_VARARGS, "The host threads' chain edges (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_chains", NULL, -1, methods};

PyMODINIT_FUNC PyInit__chains(void) { return PyModule_Create(&module); }
