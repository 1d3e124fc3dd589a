/* Longest path in a weighted DAG, in time linear in its nodes and edges.

   longest(src, dst, weight, dist, pred) -> int

   src, dst, weight: int64 buffers of one length E (edge e goes src[e] -> dst[e], weight[e] >= 0
   expected but not required); dist, pred: writable int64 buffers of length N (the node count).
   On return dist[v] is the length of the longest path ending at v (a path may start at any
   node, so dist >= 0) and pred[v] the edge that path arrives by (-1: the path starts at v).
   Nodes are taken in a topological order (Kahn's algorithm, first in first out, seeded in
   node order); of two equally long paths the first found is kept.  Returns the number of
   nodes reached in that order: N when the graph is acyclic, fewer when a cycle holds the rest
   (their dist/pred are then only what their processed predecessors gave). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *longest(PyObject *self, PyObject *args) {
    Py_buffer sb, db, wb, distb, predb;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &sb, &db, &wb, &distb, &predb)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t E = sb.len / 8, N = distb.len / 8;
    int64_t *order = NULL, *start = NULL, *indeg = NULL, *queue = NULL;
    if (db.len != sb.len || wb.len != sb.len || predb.len != distb.len) {
        PyErr_SetString(PyExc_ValueError, "longest: buffers of unequal lengths");
        goto done;
    }
    const int64_t *src = (const int64_t *)sb.buf, *dst = (const int64_t *)db.buf;
    const int64_t *w = (const int64_t *)wb.buf;
    int64_t *dist = (int64_t *)distb.buf, *pred = (int64_t *)predb.buf;
    for (Py_ssize_t e = 0; e < E; e++) {
        if (src[e] < 0 || src[e] >= N || dst[e] < 0 || dst[e] >= N) {
            PyErr_SetString(PyExc_ValueError, "longest: an edge names a node out of range");
            goto done;
        }
    }
    order = malloc(sizeof(int64_t) * (E > 0 ? E : 1));
    start = calloc((size_t)N + 1, sizeof(int64_t));
    indeg = calloc((size_t)N + 1, sizeof(int64_t));
    queue = malloc(sizeof(int64_t) * (N > 0 ? N : 1));
    if (!order || !start || !indeg || !queue) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t reached = 0;
    Py_BEGIN_ALLOW_THREADS
    /* edges grouped by source, stable (counting sort) */
    for (Py_ssize_t e = 0; e < E; e++) {
        start[src[e] + 1]++;
        indeg[dst[e]]++;
    }
    for (Py_ssize_t v = 0; v < N; v++) start[v + 1] += start[v];
    {
        int64_t *fill = malloc(sizeof(int64_t) * (N > 0 ? N : 1));
        if (fill) {
            memcpy(fill, start, sizeof(int64_t) * (size_t)N);
            for (Py_ssize_t e = 0; e < E; e++) order[fill[src[e]]++] = e;
            free(fill);
        } else {
            E = -1; /* flag: out of memory, reported below */
        }
    }
    if (E >= 0) {
        for (Py_ssize_t v = 0; v < N; v++) {
            dist[v] = 0;
            pred[v] = -1;
        }
        Py_ssize_t head = 0, tail = 0;
        for (Py_ssize_t v = 0; v < N; v++)
            if (indeg[v] == 0) queue[tail++] = v;
        while (head < tail) {
            int64_t u = queue[head++];
            reached++;
            int64_t du = dist[u];
            for (int64_t k = start[u]; k < start[u + 1]; k++) {
                int64_t e = order[k], v = dst[e];
                int64_t cand = du + w[e];
                if (cand > dist[v]) {
                    dist[v] = cand;
                    pred[v] = e;
                }
                if (--indeg[v] == 0) queue[tail++] = v;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (E < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyLong_FromSsize_t(reached);
done:
    free(order);
    free(start);
    free(indeg);
    free(queue);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&wb);
    PyBuffer_Release(&distb);
    PyBuffer_Release(&predb);
    return result;
}

static PyMethodDef methods[] = {
    {"longest", longest, METH_VARARGS,
     "longest(src, dst, weight, dist, pred) -> nodes reached: longest paths in a DAG"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_longest",
    "Longest path in a weighted DAG (see opscope.analysis.critical.longest).", -1, methods,
};

PyMODINIT_FUNC PyInit__longest(void) { return PyModule_Create(&module); }
