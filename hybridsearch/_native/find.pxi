# find_vector: the native find path (included into _kernels.pyx). One call checks the query,
# searches (HNSW walk or exact scan) without the GIL and builds the hits Results takes: the ids
# as a list of str decoded from the ids StringColumn, the scores as float32.

from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.math cimport sqrt, fabs
from libc.float cimport FLT_MAX


cdef float *_query_floats(object q, Py_ssize_t d, double sq_lo, double sq_hi, double *ss_out):
    """The query as d float32 values in a malloc'd buffer, or NULL when it is not a native-order,
    aligned, C-contiguous float32/float64 array of shape (d,) or (1, d) whose squared norm lies
    strictly inside (sq_lo, sq_hi) (which excludes NaN, inf and the zero vector). NULL sends the
    query to the general path, which refuses it with its message or takes it."""
    if not cnp.PyArray_CheckExact(q):
        return NULL
    cdef cnp.ndarray a = <cnp.ndarray>q
    cdef int nd = cnp.PyArray_NDIM(a)
    cdef cnp.npy_intp *shape = cnp.PyArray_DIMS(a)
    if not ((nd == 1 and shape[0] == d) or (nd == 2 and shape[0] == 1 and shape[1] == d)):
        return NULL
    if not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a) and cnp.PyArray_ISNOTSWAPPED(a)):
        return NULL
    cdef int t = cnp.PyArray_TYPE(a)
    if t != cnp.NPY_FLOAT32 and t != cnp.NPY_FLOAT64:
        return NULL
    cdef float *out = <float *>malloc(max(d, 1) * sizeof(float))
    if out == NULL:
        raise MemoryError()
    cdef Py_ssize_t i
    cdef double ss = 0, v
    cdef const float *f32
    cdef const double *f64
    if t == cnp.NPY_FLOAT32:
        f32 = <const float *>cnp.PyArray_DATA(a)
        for i in range(d):
            out[i] = f32[i]
            ss += <double>f32[i] * f32[i]
    else:
        f64 = <const double *>cnp.PyArray_DATA(a)
        for i in range(d):
            v = f64[i]
            if not fabs(v) <= FLT_MAX:  # NaN, inf, or beyond float32 (its cast is undefined in C)
                free(out)
                return NULL
            out[i] = <float>v  # rounded to nearest, as numpy's astype(float32)
            ss += <double>out[i] * out[i]
    if not (sq_lo < ss < sq_hi):
        free(out)
        return NULL
    ss_out[0] = ss
    return out


cdef const void *_block(cnp.ndarray a, int typenum, int ndim, Py_ssize_t rows, Py_ssize_t cols) except NULL:
    """The data of a store array after checking its type, shape and layout (a bug otherwise)."""
    if (a is None or cnp.PyArray_TYPE(a) != typenum or cnp.PyArray_NDIM(a) != ndim
            or not cnp.PyArray_IS_C_CONTIGUOUS(a) or cnp.PyArray_DIMS(a)[0] < rows
            or (ndim == 2 and cnp.PyArray_DIMS(a)[1] != cols)):
        raise ValueError("find_vector: a store array has the wrong type, shape or layout")
    return _data(a)


def find_vector(object q, str metric, double sq_lo, double sq_hi, HnswIndex graph, Py_ssize_t ef,
                cnp.ndarray X, Py_ssize_t n, Py_ssize_t dim, cnp.ndarray aux, cnp.ndarray live,
                Py_ssize_t k, cnp.ndarray id_data, cnp.ndarray id_start, cnp.ndarray id_length,
                bint scan=False):
    """One vector find over rows [0, n) of the vector block X -> (ids, scores float32, walk_ef),
    best first, at most k hits; or None when the query must take the general path (see
    _query_floats: anything but a clean flat float array, which the general path then checks
    and refuses with its message).

    With `graph` (not None and holding nodes) an HNSW walk with beam max(min(ef, nodes), k)
    (walk_ef, 0 when the exact scan ran); a walk that finds fewer than min(k, nodes) hits, or no
    graph, scans rows [0, n) exactly, restricted to `live` (a bitset; None: every row). For
    cosine the walk takes the query scaled to unit length; the exact scan the query as given.
    With `scan` the graph is scanned exactly on its int8 codes instead of walked (hs_hnsw_scan;
    the float scan when it holds no codes). The caller holds the store's read lock for the whole call."""
    cdef int m = METRICS[metric]
    cdef double ss = 0
    cdef float *qf = _query_floats(q, dim, sq_lo, sq_hi, &ss)
    if qf == NULL:
        return None
    cdef float *scores = NULL
    cdef int64_t *rows = NULL
    cdef Py_ssize_t i, c = 0, ef_used = 0, want = 0
    cdef const float *xp
    cdef const float *ap = NULL
    cdef const uint64_t *bp = NULL
    cdef const uint8_t *dp
    cdef const int64_t *sp
    cdef const int32_t *lp
    cdef Py_ssize_t nbytes
    cdef int64_t count = 0, r, s0
    cdef int32_t ln
    cdef float norm
    cdef float *qn = NULL
    cdef int rc = HS_OK
    cdef bint walk, nogil_scan
    cdef hs_hnsw *g = NULL
    try:
        xp = <const float *>_block(X, cnp.NPY_FLOAT32, 2, n, dim)
        if m != HS_METRIC_IP:
            ap = <const float *>_block(aux, cnp.NPY_FLOAT32, 1, n, 0)
        if live is not None:
            bp = <const uint64_t *>_block(live, cnp.NPY_UINT64, 1, (n + 63) // 64, 0)
        dp = <const uint8_t *>_block(id_data, cnp.NPY_UINT8, 1, 0, 0)
        nbytes = cnp.PyArray_DIMS(id_data)[0]
        sp = <const int64_t *>_block(id_start, cnp.NPY_INT64, 1, n, 0)
        lp = <const int32_t *>_block(id_length, cnp.NPY_INT32, 1, n, 0)
        if graph is not None:
            if graph.dim != dim or graph.high > n:
                raise ValueError("find_vector: the graph does not match the vector block")
            g = graph.g
            count = hs_hnsw_count(g)
        walk = count > 0
        if k > 0:
            scores = <float *>malloc(k * sizeof(float))
            rows = <int64_t *>malloc(k * sizeof(int64_t))
            if scores == NULL or rows == NULL:
                raise MemoryError()
            if walk:
                want = min(k, count)
                ef_used = max(min(ef, max(count, 1)), k)
                norm = <float>sqrt(ss)
                if m == HS_METRIC_COSINE:
                    # the walk compares unit vectors; the scan below takes the query as it is
                    qn = <float *>malloc(dim * sizeof(float))
                    if qn == NULL:
                        raise MemoryError()
                    for i in range(dim):
                        qn[i] = qf[i] / norm
                else:
                    qn = qf
                with nogil:
                    if scan:
                        ef_used = 0
                        rc = hs_hnsw_scan(g, xp, qn, 1, k, NULL, 0, scores, rows)
                        if rc == HS_EINVAL:  # no codes: the float block
                            rc = hs_exact_search(xp, n, dim, ap, qf, 1, m, bp, k, scores, rows)
                    else:
                        rc = hs_hnsw_search(g, xp, qn, 1, k, ef_used, NULL, HS_HNSW_PLAIN, scores, rows, NULL)
                        if rc == HS_OK and rows[want - 1] < 0:  # the walk reached too few nodes: scan
                            rc = hs_exact_search(xp, n, dim, ap, qf, 1, m, bp, k, scores, rows)
                if qn != qf:
                    free(qn)
            else:
                nogil_scan = <int64_t>n * dim >= NOGIL_MIN_WORK
                if nogil_scan:
                    with nogil:
                        rc = hs_exact_search(xp, n, dim, ap, qf, 1, m, bp, k, scores, rows)
                else:
                    rc = hs_exact_search(xp, n, dim, ap, qf, 1, m, bp, k, scores, rows)
            _check(rc)
            while c < k and rows[c] >= 0:
                c += 1
        ids = PyList_New(c)
        for i in range(c):
            r = rows[i]
            if r >= n:
                raise ValueError("find_vector: a hit is beyond the store")
            s0, ln = sp[r], lp[r]
            if ln < 0 or s0 < 0 or s0 + ln > nbytes:
                raise ValueError("find_vector: a hit has no id")
            text = PyUnicode_DecodeUTF8(<const char *>dp + s0, ln, "strict")
            Py_INCREF(text)
            PyList_SET_ITEM(ids, i, text)
        out = np.empty(c, dtype=np.float32)
        if c:
            memcpy(cnp.PyArray_DATA(out), scores, c * sizeof(float))
        return ids, out, ef_used
    finally:
        free(qf)
        free(scores)
        free(rows)
