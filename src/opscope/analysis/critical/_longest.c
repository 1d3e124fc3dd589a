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

/* walk(pred, src, ends, out) -> int

   For each node in ``ends`` (int64), the edges of the longest path ending there, last to
   first, written one path after another into ``out`` (int64, writable, large enough: at most
   one edge per node per path); returns the number written.  ``pred``/``src`` as longest()
   gives and takes them.  A path stops at a node whose pred is -1, or after N edges (a guard:
   pred never holds a cycle when longest() succeeded).  The caller finds each path's end by
   its count, which it gets from ``counts`` (int64, writable, one per end). */
static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer pb, sb, eb, ob, cb;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &pb, &sb, &eb, &ob, &cb)) return NULL;
    const int64_t *pred = (const int64_t *)pb.buf, *src = (const int64_t *)sb.buf;
    const int64_t *ends = (const int64_t *)eb.buf;
    int64_t *out = (int64_t *)ob.buf, *counts = (int64_t *)cb.buf;
    Py_ssize_t N = pb.len / 8, M = eb.len / 8, cap = ob.len / 8, E = sb.len / 8;
    Py_ssize_t k = 0;
    int bad = 0;
    if (cb.len / 8 != M) bad = 1;
    for (Py_ssize_t i = 0; i < M && !bad; i++) {
        int64_t v = ends[i];
        Py_ssize_t here = 0;
        if (v < 0 || v >= N) { bad = 1; break; }
        int64_t e = pred[v];
        while (e >= 0 && here <= N) {
            if (e >= E || k >= cap) { bad = 1; break; }
            out[k++] = e;
            here++;
            v = src[e];
            if (v < 0 || v >= N) { bad = 1; break; }
            e = pred[v];
        }
        counts[i] = here;
    }
    PyBuffer_Release(&pb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&eb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&cb);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "walk: a node or edge out of range, or out too small");
        return NULL;
    }
    return PyLong_FromSsize_t(k);
}

/* region(indptr, order, src, dst, weight, label, stop, source, nlab,
          dist, pred, lab, origin, indeg, seen, out) -> int

   Longest paths over the part of a DAG that a search may cross without passing a *stop*
   node, for :mod:`opscope.analysis.critical.contract`.  The edges come grouped by their
   source: those of node v are order[indptr[v]:indptr[v + 1]] (edge ids into src/dst/weight/
   label, int64); stop is one byte per node.

   source >= 0: the region is every node reachable from source by edges whose tail is source
   or not a stop node (stop nodes are reached but not crossed); paths start at source.
   source < 0: the region is every node, paths may start anywhere, and stop nodes are not
   crossed (their out-edges are left out).

   Nodes are taken in a topological order (Kahn, first in first out: from source, or seeded in
   node order); of two equally long paths the first found is kept.  For each node v of the
   region: dist[v] (int64), pred[v] (the edge the path arrives by, -1 where it starts),
   origin[v] (the node it starts at) and lab[v * nlab + l] (its weight per label l; label -1
   carries none).  The caller checks the edges' ranges once (see below).  indeg (int64) and
   seen (uint8) are scratch buffers of N that must be zero
   and are left zero.  out (int64, N) gets the region's nodes in the order taken; the count is
   returned (fewer than the region when a cycle holds the rest). */
static PyObject *region(PyObject *self, PyObject *args) {
    Py_buffer ib, ob, sb, db, wb, lb, stb, distb, predb, labb, orb, inb, seb, outb;
    Py_ssize_t source, nlab;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*nnw*w*w*w*w*w*w*", &ib, &ob, &sb, &db, &wb, &lb,
                          &stb, &source, &nlab, &distb, &predb, &labb, &orb, &inb, &seb, &outb))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t N = stb.len, E = sb.len / 8;
    int64_t *list = NULL;
    if (ib.len != (N + 1) * 8 || ob.len != sb.len || db.len != sb.len || wb.len != sb.len ||
        lb.len != sb.len || distb.len != N * 8 || predb.len != N * 8 || orb.len != N * 8 ||
        inb.len != N * 8 || seb.len != N || outb.len != N * 8 || nlab < 1 ||
        labb.len != N * nlab * 8 || source >= N) {
        PyErr_SetString(PyExc_ValueError, "region: buffers of unequal lengths");
        goto done;
    }
    const int64_t *indptr = (const int64_t *)ib.buf, *order = (const int64_t *)ob.buf;
    const int64_t *src = (const int64_t *)sb.buf, *dst = (const int64_t *)db.buf;
    const int64_t *w = (const int64_t *)wb.buf, *label = (const int64_t *)lb.buf;
    const uint8_t *stop = (const uint8_t *)stb.buf;
    int64_t *dist = (int64_t *)distb.buf, *pred = (int64_t *)predb.buf;
    int64_t *lab = (int64_t *)labb.buf, *origin = (int64_t *)orb.buf;
    int64_t *indeg = (int64_t *)inb.buf, *out = (int64_t *)outb.buf;
    uint8_t *seen = (uint8_t *)seb.buf;
    if (indptr[N] != E) {
        PyErr_SetString(PyExc_ValueError, "region: indptr does not cover the edges");
        goto done;
    }
    /* The edges' ranges (src, dst and order within 0..N-1 and 0..E-1, indptr nondecreasing
       from 0 to E, label below nlab) are checked once by the caller
       (contract.Searcher), not on every search: a search must cost its region only. */
    list = malloc(sizeof(int64_t) * (N > 0 ? N : 1));
    if (!list) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t count = 0, taken = 0;
    Py_BEGIN_ALLOW_THREADS
    /* the region, and each node's in-degree from the nodes that are crossed */
    if (source >= 0) {
        list[count++] = source;
        seen[source] = 1;
        for (Py_ssize_t i = 0; i < count; i++) {
            int64_t x = list[i];
            if (x != source && stop[x]) continue;
            for (int64_t k = indptr[x]; k < indptr[x + 1]; k++) {
                int64_t v = dst[order[k]];
                indeg[v]++;
                if (!seen[v]) {
                    seen[v] = 1;
                    list[count++] = v;
                }
            }
        }
    } else {
        for (Py_ssize_t x = 0; x < N; x++) {
            list[count++] = x;
            if (stop[x]) continue;
            for (int64_t k = indptr[x]; k < indptr[x + 1]; k++) indeg[dst[order[k]]]++;
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t x = list[i];
        dist[x] = 0;
        pred[x] = -1;
        origin[x] = x;
        memset(lab + x * nlab, 0, sizeof(int64_t) * (size_t)nlab);
    }
    /* Kahn's order, first in first out */
    Py_ssize_t tail = 0;
    if (source >= 0) {
        out[tail++] = source;
    } else {
        for (Py_ssize_t x = 0; x < N; x++)
            if (indeg[x] == 0) out[tail++] = x;
    }
    while (taken < tail) {
        int64_t u = out[taken++];
        if (u != source && stop[u]) continue;
        int64_t du = dist[u];
        for (int64_t k = indptr[u]; k < indptr[u + 1]; k++) {
            int64_t e = order[k], v = dst[e];
            int64_t cand = du + w[e];
            if (cand > dist[v]) {
                dist[v] = cand;
                pred[v] = e;
            }
            if (--indeg[v] == 0) out[tail++] = v;
        }
    }
    /* each node's start and weight per label, along its path, in the order taken */
    for (Py_ssize_t i = 0; i < taken; i++) {
        int64_t v = out[i], e = pred[v];
        if (e < 0) continue;
        int64_t u = src[e];
        origin[v] = origin[u];
        memcpy(lab + v * nlab, lab + u * nlab, sizeof(int64_t) * (size_t)nlab);
        if (label[e] >= 0) lab[v * nlab + label[e]] += w[e];
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        indeg[list[i]] = 0;
        seen[list[i]] = 0;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(taken);
done:
    free(list);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&wb);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&stb);
    PyBuffer_Release(&distb);
    PyBuffer_Release(&predb);
    PyBuffer_Release(&labb);
    PyBuffer_Release(&orb);
    PyBuffer_Release(&inb);
    PyBuffer_Release(&seb);
    PyBuffer_Release(&outb);
    return result;
}

static PyMethodDef methods[] = {
    {"region", region, METH_VARARGS,
     "region(indptr, order, src, dst, weight, label, stop, source, nlab, dist, pred, lab, "
     "origin, indeg, seen, out) -> nodes taken: longest paths up to stop nodes"},
    {"walk", walk, METH_VARARGS,
     "walk(pred, src, ends, out, counts) -> edges written: the longest paths ending at ends"},
    {"longest", longest, METH_VARARGS,
     "longest(src, dst, weight, dist, pred) -> nodes reached: longest paths in a DAG"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_longest",
    "Longest path in a weighted DAG (see opscope.analysis.critical.longest).", -1, methods,
};

PyMODINIT_FUNC PyInit__longest(void) { return PyModule_Create(&module); }
