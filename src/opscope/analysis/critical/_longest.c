/* Longest path in a weighted DAG, in time linear in its nodes and edges.

   longest(src, dst, weight, dist, pred[, keep[, factor]]) -> int

   src, dst, weight: buffers of one length E (edge e goes src[e] -> dst[e], weight[e] >= 0
   expected but not required); dist, pred: writable buffers of length N (the node count).
   weight and dist are int64; src, dst and pred are int64, or all three int32 (a graph of
   fewer than 2**31 nodes and edges held with narrow ids: half their memory);
   keep (optional, None or one byte per edge): only the edges whose byte is not zero take part,
   as if the others were not there (pred names edges by their index in the whole buffers);
   factor (optional, None or one int16 per edge): each edge searched with weight[e] *
   factor[e] (the tie classes' effective weights, with no array of them made).
   On return dist[v] is the length of the longest path ending at v (a path may start at any
   node, so dist >= 0) and pred[v] the edge that path arrives by (-1: the path starts at v).
   Nodes are taken in a topological order (Kahn's algorithm, first in first out, seeded in
   node order); of two equally long paths the first found is kept.  Returns the number of
   nodes reached in that order: N when the graph is acyclic, fewer when a cycle holds the rest
   (their dist/pred are then only what their processed predecessors gave).  The search's
   scratch (an edge order, and per node its first edge, in-degree and queue slot) is of 32-bit
   integers when N and E allow it: half the memory of 64-bit ones. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* Scratch memory for the search, zeroed when asked: large blocks are 2 MiB-aligned and
   advised into transparent huge pages where the kernel offers them on request (Linux
   "madvise" mode), as NumPy advises its own arrays.  At a million events the search's
   scratch is some 60 MB touched once and then in a scattered order: with 4 KiB pages its
   page faults and TLB misses cost about as much as the search itself.  Free with free(). */
static void *scratch(size_t n, int zero) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)2 << 20;
    if (n >= 2 * huge) {
        void *p = NULL;
        size_t m = (n + huge - 1) / huge * huge;
        if (posix_memalign(&p, huge, m) != 0) return NULL;
        madvise(p, m, MADV_HUGEPAGE);
        if (zero) memset(p, 0, n);
        return p;
    }
#endif
    return zero ? calloc(n ? n : 1, 1) : malloc(n ? n : 1);
}

/* Kahn's step from node u: each of its out-edges (order[first[u]:first[u + 1]]) may lengthen
   the path to its head; a head whose in-edges are all seen joins the queue.  Of two equally
   long paths the first found is kept. */
static inline void relax(int64_t u, const int64_t *first, const int64_t *order,
                         const int64_t *dst, const int64_t *w, int64_t *dist, int64_t *pred,
                         int64_t *indeg, int64_t *queue, Py_ssize_t *tail) {
    int64_t du = dist[u];
    for (int64_t k = first[u]; k < first[u + 1]; k++) {
        int64_t e = order[k], v = dst[e];
        int64_t cand = du + w[e];
        if (cand > dist[v]) {
            dist[v] = cand;
            pred[v] = e;
        }
        if (--indeg[v] == 0) queue[(*tail)++] = v;
    }
}

/* The search, for one width of scratch integers (IDX): edges grouped by source (a stable
   counting sort), then Kahn's order from the nodes with no in-edge, each node's out-edges
   relaxed in turn (a head whose in-edges are all seen joins the queue; of two equally long
   paths the first found is kept).  Returns the nodes reached, or -1 when out of memory. */
#define LONGEST_SEARCH(NAME, IDX, T)                                                           \
    static Py_ssize_t NAME(Py_ssize_t E, Py_ssize_t N, const T *src, const T *dst,             \
                           const int64_t *w, const uint8_t *keep, const int16_t *factor,       \
                           int64_t *dist, T *pred) {                                           \
        IDX *order = scratch(sizeof(IDX) * (size_t)E, 0);                                      \
        IDX *start = scratch(sizeof(IDX) * ((size_t)N + 1), 1);                                \
        IDX *indeg = scratch(sizeof(IDX) * ((size_t)N + 1), 1);                                \
        IDX *queue = scratch(sizeof(IDX) * (size_t)N, 0);                                      \
        Py_ssize_t reached = -1;                                                               \
        if (!order || !start || !indeg || !queue) goto out;                                    \
        reached = 0;                                                                           \
        for (Py_ssize_t e = 0; e < E; e++) {                                                   \
            if (keep && !keep[e]) continue;                                                    \
            start[src[e] + 1]++;                                                               \
            indeg[dst[e]]++;                                                                   \
        }                                                                                      \
        for (Py_ssize_t v = 0; v < N; v++) start[v + 1] += start[v];                           \
        /* each edge to its source's next slot (start[v] then ends where v + 1 begins), then   \
           the starts moved back one place: no second array of N for the cursors */            \
        for (Py_ssize_t e = 0; e < E; e++) {                                                   \
            if (keep && !keep[e]) continue;                                                    \
            order[start[src[e]]++] = (IDX)e;                                                   \
        }                                                                                      \
        memmove(start + 1, start, sizeof(IDX) * (size_t)N);                                    \
        start[0] = 0;                                                                          \
        for (Py_ssize_t v = 0; v < N; v++) {                                                   \
            dist[v] = 0;                                                                       \
            pred[v] = -1;                                                                      \
        }                                                                                      \
        Py_ssize_t head = 0, tail = 0;                                                         \
        for (Py_ssize_t v = 0; v < N; v++)                                                     \
            if (indeg[v] == 0) queue[tail++] = (IDX)v;                                         \
        while (head < tail) {                                                                  \
            IDX u = queue[head++];                                                             \
            reached++;                                                                         \
            int64_t du = dist[u];                                                              \
            for (IDX k = start[u]; k < start[u + 1]; k++) {                                    \
                IDX e = order[k];                                                              \
                int64_t v = dst[e];                                                            \
                int64_t cand = du + (factor ? w[e] * (int64_t)factor[e] : w[e]);               \
                if (cand > dist[v]) {                                                          \
                    dist[v] = cand;                                                            \
                    pred[v] = (T)e;                                                            \
                }                                                                              \
                if (--indeg[v] == 0) queue[tail++] = (IDX)v;                                   \
            }                                                                                  \
        }                                                                                      \
    out:                                                                                       \
        free(order);                                                                           \
        free(start);                                                                           \
        free(indeg);                                                                           \
        free(queue);                                                                           \
        return reached;                                                                        \
    }

LONGEST_SEARCH(search32, int32_t, int64_t)
LONGEST_SEARCH(search64, int64_t, int64_t)
/* node and edge ids of 32 bits (a graph below 2**31 nodes and edges): half the memory */
LONGEST_SEARCH(search32n, int32_t, int32_t)

static PyObject *longest(PyObject *self, PyObject *args) {
    Py_buffer sb, db, wb, distb, predb, kb = {0}, fb = {0};
    PyObject *keep_obj = Py_None, *factor_obj = Py_None;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*|OO", &sb, &db, &wb, &distb, &predb, &keep_obj,
                          &factor_obj))
        return NULL;
    PyObject *result = NULL;
    int have_keep = 0, have_factor = 0;
    /* the weights are int64: they give the edge count; src, dst and pred are int64, or all
       three int32 (narrow ids) */
    Py_ssize_t E = wb.len / 8, N = distb.len / 8;
    int ids32 = E > 0 ? sb.len == 4 * E : (N > 0 && predb.len == 4 * N);
    if (keep_obj != Py_None) {
        if (PyObject_GetBuffer(keep_obj, &kb, PyBUF_SIMPLE) < 0) goto done;
        have_keep = 1;
        if (kb.len != E) {
            PyErr_SetString(PyExc_ValueError, "longest: keep must hold one byte per edge");
            goto done;
        }
    }
    if (factor_obj != Py_None) {
        if (PyObject_GetBuffer(factor_obj, &fb, PyBUF_SIMPLE) < 0) goto done;
        have_factor = 1;
        if (fb.len != 2 * E) {
            PyErr_SetString(PyExc_ValueError, "longest: factor must hold one int16 per edge");
            goto done;
        }
    }
    Py_ssize_t width = ids32 ? 4 : 8;
    if (sb.len != width * E || db.len != sb.len || wb.len != 8 * E || predb.len != width * N ||
        (ids32 && (E >= INT32_MAX || N >= INT32_MAX))) {
        PyErr_SetString(PyExc_ValueError, "longest: buffers of unequal lengths or widths");
        goto done;
    }
    const int64_t *w = (const int64_t *)wb.buf;
    const uint8_t *keep = have_keep ? (const uint8_t *)kb.buf : NULL;
    const int16_t *factor = have_factor ? (const int16_t *)fb.buf : NULL;
    int64_t *dist = (int64_t *)distb.buf;
    int bad = 0;
    if (ids32) {
        const int32_t *src = (const int32_t *)sb.buf, *dst = (const int32_t *)db.buf;
        for (Py_ssize_t e = 0; e < E && !bad; e++)
            bad = src[e] < 0 || src[e] >= N || dst[e] < 0 || dst[e] >= N;
    } else {
        const int64_t *src = (const int64_t *)sb.buf, *dst = (const int64_t *)db.buf;
        for (Py_ssize_t e = 0; e < E && !bad; e++)
            bad = src[e] < 0 || src[e] >= N || dst[e] < 0 || dst[e] >= N;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "longest: an edge names a node out of range");
        goto done;
    }
    Py_ssize_t reached;
    int narrow = E < INT32_MAX && N < INT32_MAX;
    Py_BEGIN_ALLOW_THREADS
    if (ids32)
        reached = search32n(E, N, (const int32_t *)sb.buf, (const int32_t *)db.buf, w, keep,
                            factor, dist, (int32_t *)predb.buf);
    else if (narrow)
        reached = search32(E, N, (const int64_t *)sb.buf, (const int64_t *)db.buf, w, keep,
                           factor, dist, (int64_t *)predb.buf);
    else
        reached = search64(E, N, (const int64_t *)sb.buf, (const int64_t *)db.buf, w, keep,
                           factor, dist, (int64_t *)predb.buf);
    Py_END_ALLOW_THREADS
    if (reached < 0)
        PyErr_NoMemory();
    else
        result = PyLong_FromSsize_t(reached);
done:
    if (have_keep) PyBuffer_Release(&kb);
    if (have_factor) PyBuffer_Release(&fb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&wb);
    PyBuffer_Release(&distb);
    PyBuffer_Release(&predb);
    return result;
}

/* walk(pred, src, ends, out, counts[, width]) -> int

   For each node in ``ends`` (int64), the edges of the longest path ending there, last to
   first, written one path after another into ``out`` (int64, writable, large enough: at most
   one edge per node per path); returns the number written.  ``pred``/``src`` as longest()
   gives and takes them, of ``width`` bytes (8, or 4 for narrow ids).  A path stops at a node
   whose pred is -1, or after N edges (a guard: pred never holds a cycle when longest()
   succeeded).  The caller finds each path's end by
   its count, which it gets from ``counts`` (int64, writable, one per end). */
/* the walk for one width of pred and src (int64, or int32 as longest() gives them for
   narrow ids); returns 1 when something is out of range */
#define WALK(NAME, T)                                                                          \
    static int NAME(const T *pred, const T *src, Py_ssize_t N, Py_ssize_t E,                 \
                    const int64_t *ends, Py_ssize_t M, int64_t *out, Py_ssize_t cap,         \
                    int64_t *counts, Py_ssize_t *written) {                                  \
        Py_ssize_t k = 0;                                                                    \
        for (Py_ssize_t i = 0; i < M; i++) {                                                 \
            int64_t v = ends[i];                                                             \
            Py_ssize_t here = 0;                                                             \
            if (v < 0 || v >= N) return 1;                                                   \
            int64_t e = pred[v];                                                             \
            while (e >= 0 && here <= N) {                                                    \
                if (e >= E || k >= cap) return 1;                                            \
                out[k++] = e;                                                                \
                here++;                                                                      \
                v = src[e];                                                                  \
                if (v < 0 || v >= N) return 1;                                               \
                e = pred[v];                                                                 \
            }                                                                                \
            counts[i] = here;                                                                \
        }                                                                                    \
        *written = k;                                                                        \
        return 0;                                                                            \
    }

WALK(walk64, int64_t)
WALK(walk32, int32_t)

static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer pb, sb, eb, ob, cb;
    int width = 8;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*|i", &pb, &sb, &eb, &ob, &cb, &width)) return NULL;
    const int64_t *ends = (const int64_t *)eb.buf;
    int64_t *out = (int64_t *)ob.buf, *counts = (int64_t *)cb.buf;
    Py_ssize_t M = eb.len / 8, cap = ob.len / 8;
    Py_ssize_t k = 0;
    int bad = (width != 4 && width != 8) || cb.len / 8 != M;
    if (!bad) {
        Py_ssize_t N = pb.len / width, E = sb.len / width;
        bad = width == 4 ? walk32((const int32_t *)pb.buf, (const int32_t *)sb.buf, N, E, ends,
                                  M, out, cap, counts, &k)
                         : walk64((const int64_t *)pb.buf, (const int64_t *)sb.buf, N, E, ends,
                                  M, out, cap, counts, &k);
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
typedef struct {
    Py_ssize_t N, nlab;
    const int64_t *indptr, *order, *src, *dst, *w, *label;
    const uint8_t *stop;
    int64_t *dist, *pred, *lab, *origin, *indeg, *out, *list;
    uint8_t *seen;
} Search;

/* One search (see region() above); returns the nodes taken, left in s->out. */
static Py_ssize_t run_search(Search *s, int64_t source) {
    const int64_t *indptr = s->indptr, *order = s->order, *src = s->src, *dst = s->dst;
    const int64_t *w = s->w, *label = s->label;
    const uint8_t *stop = s->stop;
    int64_t *dist = s->dist, *pred = s->pred, *lab = s->lab, *origin = s->origin;
    int64_t *indeg = s->indeg, *out = s->out, *list = s->list;
    uint8_t *seen = s->seen;
    Py_ssize_t N = s->N, nlab = s->nlab, count = 0, taken = 0;
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
        relax(u, indptr, order, dst, w, dist, pred, indeg, out, &tail);
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
    return taken;
}

/* The buffers region() and contract() share, checked: 0 and an exception when they do not
   fit together. */
static int search_of(Search *s, Py_buffer *ib, Py_buffer *ob, Py_buffer *sb, Py_buffer *db,
                     Py_buffer *wb, Py_buffer *lb, Py_buffer *stb, Py_ssize_t nlab,
                     Py_buffer *distb, Py_buffer *predb, Py_buffer *labb, Py_buffer *orb,
                     Py_buffer *inb, Py_buffer *seb, Py_buffer *outb) {
    Py_ssize_t N = stb->len, E = sb->len / 8;
    if (ib->len != (N + 1) * 8 || ob->len != sb->len || db->len != sb->len ||
        wb->len != sb->len || lb->len != sb->len || distb->len != N * 8 ||
        predb->len != N * 8 || orb->len != N * 8 || inb->len != N * 8 || seb->len != N ||
        outb->len != N * 8 || nlab < 1 || labb->len != N * nlab * 8) {
        PyErr_SetString(PyExc_ValueError, "region: buffers of unequal lengths");
        return 0;
    }
    s->N = N;
    s->nlab = nlab;
    s->indptr = (const int64_t *)ib->buf;
    s->order = (const int64_t *)ob->buf;
    s->src = (const int64_t *)sb->buf;
    s->dst = (const int64_t *)db->buf;
    s->w = (const int64_t *)wb->buf;
    s->label = (const int64_t *)lb->buf;
    s->stop = (const uint8_t *)stb->buf;
    s->dist = (int64_t *)distb->buf;
    s->pred = (int64_t *)predb->buf;
    s->lab = (int64_t *)labb->buf;
    s->origin = (int64_t *)orb->buf;
    s->indeg = (int64_t *)inb->buf;
    s->seen = (uint8_t *)seb->buf;
    s->out = (int64_t *)outb->buf;
    s->list = NULL;
    if (s->indptr[N] != E) {
        PyErr_SetString(PyExc_ValueError, "region: indptr does not cover the edges");
        return 0;
    }
    /* The edges' ranges (src, dst and order within 0..N-1 and 0..E-1, indptr nondecreasing
       from 0 to E, label below nlab) are checked once by the caller
       (contract.Searcher), not on every search: a search must cost its region only. */
    s->list = malloc(sizeof(int64_t) * (N > 0 ? N : 1));
    if (!s->list) {
        PyErr_NoMemory();
        return 0;
    }
    return 1;
}

static PyObject *region(PyObject *self, PyObject *args) {
    Py_buffer ib, ob, sb, db, wb, lb, stb, distb, predb, labb, orb, inb, seb, outb;
    Py_ssize_t source, nlab;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*nnw*w*w*w*w*w*w*", &ib, &ob, &sb, &db, &wb, &lb,
                          &stb, &source, &nlab, &distb, &predb, &labb, &orb, &inb, &seb, &outb))
        return NULL;
    PyObject *result = NULL;
    Search s;
    s.list = NULL;
    if (!search_of(&s, &ib, &ob, &sb, &db, &wb, &lb, &stb, nlab, &distb, &predb, &labb, &orb,
                   &inb, &seb, &outb))
        goto done;
    if (source >= s.N) {
        PyErr_SetString(PyExc_ValueError, "region: source out of range");
        goto done;
    }
    Py_ssize_t taken;
    Py_BEGIN_ALLOW_THREADS
    taken = run_search(&s, source);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(taken);
done:
    free(s.list);
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

/* contract(indptr, order, src, dst, weight, label, stop, nlab, sources, pos,
            dist, pred, lab, origin, indeg, seen, out) -> (ints, labs)

   For :meth:`opscope.analysis.critical.contract.Contraction.contract`: a search from each
   node of ``sources`` (int64, the interfaces, all stop nodes), in order; from the i-th, one
   contracted edge to each stop node the search reaches (other than the source, in the order
   taken), then one to the reached non-stop node of the longest path, if that is longer than
   0 (ties: the lowest node).  Each edge is five int64 in ``ints`` - i, ``pos`` of its end
   node (-1 for the non-stop end), the end node, the path's length, the node it starts at -
   and nlab int64 in ``labs``, its weight per label.  The other buffers as region() takes
   them. */
typedef struct {
    int64_t *buf;
    Py_ssize_t len, cap;
} Grow;

static int grow_push(Grow *g, const int64_t *vals, Py_ssize_t n) {
    if (g->len + n > g->cap) {
        Py_ssize_t cap = g->cap ? g->cap : 1024;
        while (cap < g->len + n) cap *= 2;
        int64_t *b = realloc(g->buf, sizeof(int64_t) * (size_t)cap);
        if (!b) return 0;
        g->buf = b;
        g->cap = cap;
    }
    memcpy(g->buf + g->len, vals, sizeof(int64_t) * (size_t)n);
    g->len += n;
    return 1;
}

static PyObject *contract(PyObject *self, PyObject *args) {
    Py_buffer ib, ob, sb, db, wb, lb, stb, srcsb, posb, distb, predb, labb, orb, inb, seb, outb;
    Py_ssize_t nlab;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*ny*y*w*w*w*w*w*w*w*", &ib, &ob, &sb, &db, &wb,
                          &lb, &stb, &nlab, &srcsb, &posb, &distb, &predb, &labb, &orb, &inb,
                          &seb, &outb))
        return NULL;
    PyObject *result = NULL;
    Grow ints = {NULL, 0, 0}, labs = {NULL, 0, 0};
    Search s;
    s.list = NULL;
    if (!search_of(&s, &ib, &ob, &sb, &db, &wb, &lb, &stb, nlab, &distb, &predb, &labb, &orb,
                   &inb, &seb, &outb))
        goto done;
    const int64_t *sources = (const int64_t *)srcsb.buf, *pos = (const int64_t *)posb.buf;
    Py_ssize_t M = srcsb.len / 8, N = s.N;
    if (posb.len != N * 8) {
        PyErr_SetString(PyExc_ValueError, "contract: pos must have one entry per node");
        goto done;
    }
    for (Py_ssize_t i = 0; i < M; i++) {
        if (sources[i] < 0 || sources[i] >= N) {
            PyErr_SetString(PyExc_ValueError, "contract: a source out of range");
            goto done;
        }
    }
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < M && !failed; i++) {
        int64_t u = sources[i];
        Py_ssize_t taken = run_search(&s, u);
        int64_t best = -1;
        for (Py_ssize_t j = 0; j < taken && !failed; j++) {
            int64_t v = s.out[j];
            if (s.stop[v]) {
                if (v == u) continue;
                int64_t row[5] = {i, pos[v], v, s.dist[v], s.origin[v]};
                failed = !grow_push(&ints, row, 5) || !grow_push(&labs, s.lab + v * nlab, nlab);
            } else if (s.dist[v] > 0 &&
                       (best < 0 || s.dist[v] > s.dist[best] ||
                        (s.dist[v] == s.dist[best] && v < best))) {
                best = v;
            }
        }
        if (best >= 0 && !failed) {
            int64_t row[5] = {i, -1, best, s.dist[best], s.origin[best]};
            failed = !grow_push(&ints, row, 5) || !grow_push(&labs, s.lab + best * nlab, nlab);
        }
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *a = PyBytes_FromStringAndSize((const char *)ints.buf, ints.len * 8);
    PyObject *b = PyBytes_FromStringAndSize((const char *)labs.buf, labs.len * 8);
    if (a && b) result = PyTuple_Pack(2, a, b);
    Py_XDECREF(a);
    Py_XDECREF(b);
done:
    free(s.list);
    free(ints.buf);
    free(labs.buf);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&wb);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&stb);
    PyBuffer_Release(&srcsb);
    PyBuffer_Release(&posb);
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
    {"contract", contract, METH_VARARGS,
     "contract(indptr, order, src, dst, weight, label, stop, nlab, sources, pos, dist, pred, "
     "lab, origin, indeg, seen, out) -> (ints, labs): the contracted edges from each source"},
    {"region", region, METH_VARARGS,
     "region(indptr, order, src, dst, weight, label, stop, source, nlab, dist, pred, lab, "
     "origin, indeg, seen, out) -> nodes taken: longest paths up to stop nodes"},
    {"walk", walk, METH_VARARGS,
     "walk(pred, src, ends, out, counts[, width]) -> edges written: the longest paths ending "
     "at ends"},
    {"longest", longest, METH_VARARGS,
     "longest(src, dst, weight, dist, pred[, keep[, factor]]) -> nodes reached: longest paths "
     "in a DAG"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_longest",
    "Longest path in a weighted DAG (see opscope.analysis.critical.longest).", -1, methods,
};

PyMODINIT_FUNC PyInit__longest(void) { return PyModule_Create(&module); }
