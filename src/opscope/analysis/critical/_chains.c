/* The host threads' chain edges of the critical path's graph, in one pass
   (opscope.analysis.critical.chains has the NumPy twin and the rules in words).

   chains(order, hrows, rowi, rowb, codes, out_src, out_dst, out_w, out_label, out_attr,
          out_kind[, width]) -> int

   width: 8 (the default) or 4, the bytes of the id buffers: order, hrows, thread, parent
   and out_src, out_dst, out_attr (int64, or int32 for narrow ids: half the memory); the
   times (start, end, awaited_end, resume_after) and out_w are int64 in either case.
   order: [2H], the host rows' starts (0..H-1) and ends (H..2H-1) in call order;
   hrows: [H], the row of each host node;
   rowi: a tuple of six buffers of the trace's N rows: thread, start, end, parent (-1
   none), awaited_end and resume_after (times, -1 none);
   rowb: a tuple of three bool buffers of N rows: blocking, host_comm, data;
   codes: int8 [7]: the labels CPU, DATA, COMM, SYNC, NONE and the edge kinds THREAD, RESUME;
   out_*: writable buffers of 2H - 1 (src, dst, attr of the ids' width; w int64; label and
   kind int8).
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

/* The pass for one width T of the id buffers (order, hrows, thread, parent, and the out
   src, dst, attr): int64, or int32 for narrow ids; the times are int64 in either case. */
#define RUN(NAME, T)                                                                           \
    static Py_ssize_t NAME(const T *order, Py_ssize_t H2, const T *hrows, Py_ssize_t H,       \
                           const void *const *ri, const uint8_t *const *rb,                  \
                           const int8_t *codes, T *osrc, T *odst, int64_t *ow, int8_t *olab,  \
                           T *oatt, int8_t *okind) {                                          \
        const T *thread = ri[0], *parent = ri[3];                                             \
        const int64_t *start = ri[1], *end = ri[2], *awaited = ri[4], *resume = ri[5];        \
        const uint8_t *blocking = rb[0], *comm = rb[1], *data = rb[2];                        \
        const int8_t CPU = codes[0], DATA = codes[1], COMM = codes[2], SYNC = codes[3];       \
        const int8_t NONE = codes[4], THREAD = codes[5], RESUME = codes[6];                   \
        Py_ssize_t m = 0;                                                                     \
        for (Py_ssize_t k = 0; k + 1 < H2; k++) {                                             \
            int64_t na = order[k], nb = order[k + 1];                                         \
            int ea = na >= H, eb = nb >= H;                                                   \
            int64_t ra = hrows[ea ? na - H : na], rb_ = hrows[eb ? nb - H : nb];              \
            if (thread[ra] != thread[rb_]) continue;                                          \
            int64_t ta = ea ? end[ra] : start[ra], tb = eb ? end[rb_] : start[rb_];           \
            int64_t att = !ea ? ra : (eb ? rb_ : (int64_t)parent[ra]);                        \
            int64_t w = tb - ta;                                                              \
            int8_t label = CPU, kind = THREAD;                                                \
            if (att < 0) { /* a gap between two top-level calls */                           \
                w = 0;                                                                        \
                label = NONE;                                                                 \
                att = -1;                                                                     \
            } else {                                                                          \
                if (awaited[att] >= 0) w = max64(0, tb - max64(ta, awaited[att]));            \
                if (data[att]) label = DATA;                                                  \
                if (comm[att]) label = COMM;                                                  \
                if (blocking[att]) label = SYNC;                                              \
            }                                                                                 \
            if (!eb && resume[rb_] >= 0) {                                                    \
                w = max64(0, tb - max64(ta, resume[rb_]));                                    \
                kind = RESUME;                                                                \
            }                                                                                 \
            osrc[m] = (T)na;                                                                  \
            odst[m] = (T)nb;                                                                  \
            ow[m] = w < 0 ? 0 : w;                                                            \
            olab[m] = label;                                                                  \
            oatt[m] = (T)att;                                                                 \
            okind[m] = kind;                                                                  \
            m++;                                                                              \
        }                                                                                     \
        return m;                                                                             \
    }

RUN(run64, int64_t)
RUN(run32, int32_t)

/* 1 when some order entry, host row or parent row is out of range (width T) */
#define CHECK(NAME, T)                                                                         \
    static const char *NAME(const T *order, Py_ssize_t H2, const T *hrows, Py_ssize_t H,       \
                            const T *parent, Py_ssize_t N) {                                   \
        for (Py_ssize_t k = 0; k < H2; k++)                                                    \
            if (order[k] < 0 || order[k] >= H2) return "chains: an order entry out of range"; \
        for (Py_ssize_t k = 0; k < H; k++)                                                     \
            if (hrows[k] < 0 || hrows[k] >= N) return "chains: a host row out of range";       \
        for (Py_ssize_t r = 0; r < N; r++) /* parents and the awaited rows index the rows */   \
            if (parent[r] >= N) return "chains: a parent row out of range";                    \
        return NULL;                                                                           \
    }

CHECK(check64, int64_t)
CHECK(check32, int32_t)

static PyObject *chains(PyObject *self, PyObject *args) {
    Py_buffer ob, hb, cb, sb, db, wb, lb, ab, kb;
    PyObject *rowi, *rowb;
    Py_buffer ib[6], bb[3];
    int ni = 0, nb = 0, width = 8;
    if (!PyArg_ParseTuple(args, "y*y*O!O!y*w*w*w*w*w*w*|i", &ob, &hb, &PyTuple_Type, &rowi,
                          &PyTuple_Type, &rowb, &cb, &sb, &db, &wb, &lb, &ab, &kb, &width))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t W = width == 4 ? 4 : 8;
    Py_ssize_t H2 = ob.len / W, H = hb.len / W, N = -1, m = 0, E = H2 > 0 ? H2 - 1 : 0;
    const void *ri[6];
    const uint8_t *rbp[3];
    if ((width != 4 && width != 8) || PyTuple_GET_SIZE(rowi) != 6 ||
        PyTuple_GET_SIZE(rowb) != 3) {
        PyErr_SetString(PyExc_ValueError,
                        "chains: width 4 or 8, six int row buffers and three bool ones");
        goto done;
    }
    for (; ni < 6; ni++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(rowi, ni), &ib[ni], PyBUF_SIMPLE) < 0) goto done;
        /* thread and parent (0, 3) of the ids' width; the times (start, end, awaited_end,
           resume_after) int64 */
        Py_ssize_t n = ib[ni].len / (ni == 0 || ni == 3 ? W : 8);
        if (N >= 0 && n != N) {
            ni++;
            PyErr_SetString(PyExc_ValueError, "chains: row buffers of unequal lengths");
            goto done;
        }
        N = n;
        ri[ni] = ib[ni].buf;
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
    if (H2 != 2 * H || cb.len != 7 || sb.len < W * E || db.len < W * E || wb.len < 8 * E ||
        ab.len < W * E || lb.len < E || kb.len < E) {
        PyErr_SetString(PyExc_ValueError, "chains: buffers of the wrong lengths");
        goto done;
    }
    const char *bad = W == 4 ? check32((const int32_t *)ob.buf, H2, (const int32_t *)hb.buf, H,
                                       (const int32_t *)ri[3], N)
                             : check64((const int64_t *)ob.buf, H2, (const int64_t *)hb.buf, H,
                                       (const int64_t *)ri[3], N);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, bad);
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    if (W == 4)
        m = run32((const int32_t *)ob.buf, H2, (const int32_t *)hb.buf, H, ri, rbp,
                  (const int8_t *)cb.buf, (int32_t *)sb.buf, (int32_t *)db.buf,
                  (int64_t *)wb.buf, (int8_t *)lb.buf, (int32_t *)ab.buf, (int8_t *)kb.buf);
    else
        m = run64((const int64_t *)ob.buf, H2, (const int64_t *)hb.buf, H, ri, rbp,
                  (const int8_t *)cb.buf, (int64_t *)sb.buf, (int64_t *)db.buf,
                  (int64_t *)wb.buf, (int8_t *)lb.buf, (int64_t *)ab.buf, (int8_t *)kb.buf);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(m);
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
