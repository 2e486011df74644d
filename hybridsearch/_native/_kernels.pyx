# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Thin wrappers over the C kernels: one call per batch, the GIL released inside.

Every function checks shapes and dtypes before handing pointers to C, so a bad
argument is a Python exception, never a crash.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, int32_t, int8_t, uint64_t, uint8_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from hybridsearch._native.kernels cimport *

cnp.import_array()

METRICS = {"ip": HS_METRIC_IP, "cosine": HS_METRIC_COSINE, "l2": HS_METRIC_L2}
# indexed by the HS_SIMD_* numbers of kernels/hs_distance.h; "neon" exists only on AArch64
SIMD_NAMES = ("scalar", "avx2", "avx512", "neon")

# A kernel call releases the GIL only when it has enough work: handing the GIL to another
# thread and taking it back costs several microseconds under contention (a futex wake and
# a context switch), more than a small call itself. Below this many multiply-adds / row
# tests the call keeps the GIL; measured on 2 cores, a filtered search over 250 rows ran
# at 0.65x its one-thread QPS with two client threads when it released the GIL.
cdef int64_t NOGIL_MIN_WORK = 1 << 18

# filter program opcodes, re-exported for hybridsearch.filters
F_I64 = HS_F_I64
F_F64 = HS_F_F64
F_CODE = HS_F_CODE
F_PRESENT = HS_F_PRESENT
F_BITS = HS_F_BITS
F_ALL = HS_F_ALL
F_NONE = HS_F_NONE
F_AND = HS_F_AND
F_OR = HS_F_OR
F_NOT = HS_F_NOT


cdef int _check(int rc) except -1:
    if rc == HS_ENOMEM:
        raise MemoryError("native kernel could not allocate memory")
    if rc != HS_OK:
        raise ValueError("native kernel rejected its arguments (code %d)" % rc)
    return 0


def simd_level():
    """Name of the SIMD instruction set the kernels dispatched to on this CPU."""
    return SIMD_NAMES[hs_simd_level()]


def simd_levels():
    """Names of every SIMD level this CPU can run, "scalar" first (force_simd accepts each)."""
    return tuple(name for i, name in enumerate(SIMD_NAMES) if hs_simd_available(i))


def force_simd(str name):
    """Use another SIMD level (to test the fallbacks); returns the level now in use.

    A level this CPU lacks (avx512 on an AVX2 machine, neon on x86, avx2 on ARM) falls back
    to the best one it has; an unknown name raises ValueError."""
    if name not in SIMD_NAMES:
        raise ValueError("unknown SIMD level %r (known: %s)" % (name, ", ".join(SIMD_NAMES)))
    return SIMD_NAMES[hs_simd_force(SIMD_NAMES.index(name))]


def exact_search(const float[:, ::1] X, Py_ssize_t n, const float[::1] xaux,
                 const float[:, ::1] Q, str metric, const uint64_t[::1] bits, Py_ssize_t k):
    """Exact top-k of every row of Q against rows [0, n) of X.

    Returns (scores float32 (nq, k), rows int64 (nq, k)), best first, padded
    with -inf / -1. `bits` (or None) is a pre-filter over the rows.
    """
    cdef int m = METRICS[metric]
    cdef Py_ssize_t nq = Q.shape[0], d = X.shape[1]
    if n < 0 or n > X.shape[0]:
        raise ValueError("n is outside the vector block")
    if Q.shape[1] != d:
        raise ValueError("query dimension %d does not match %d" % (Q.shape[1], d))
    if k < 0:
        raise ValueError("k must be >= 0")
    if m != HS_METRIC_IP and (xaux is None or xaux.shape[0] < n):
        raise ValueError("metric %s needs one auxiliary value per row" % metric)
    if bits is not None and bits.shape[0] * 64 < n:
        raise ValueError("bitset is shorter than the rows")
    scores = np.empty((nq, k), dtype=np.float32)
    ids = np.empty((nq, k), dtype=np.int64)
    if nq == 0 or k == 0:
        return scores, ids
    cdef float[:, ::1] s = scores
    cdef int64_t[:, ::1] r = ids
    cdef const float *xp = &X[0, 0] if X.shape[0] > 0 else NULL
    cdef const float *ap = &xaux[0] if (xaux is not None and xaux.shape[0] > 0) else NULL
    cdef const uint64_t *bp = &bits[0] if (bits is not None and bits.shape[0] > 0) else NULL
    cdef int rc
    if bits is not None and bits.shape[0] == 0:
        n = 0
    cdef int64_t rows = n if bp == NULL or n == 0 else hs_bitset_popcount(bp, (n + 63) // 64)
    if <int64_t>nq * rows * d >= NOGIL_MIN_WORK:
        with nogil:
            rc = hs_exact_search(xp, n, d, ap, &Q[0, 0], nq, m, bp, k, &s[0, 0], &r[0, 0])
    else:
        rc = hs_exact_search(xp, n, d, ap, &Q[0, 0], nq, m, bp, k, &s[0, 0], &r[0, 0])
    _check(rc)
    return scores, ids


cdef object _row_scores(const float[:, ::1] X, const int64_t *rows, Py_ssize_t n, const float[::1] q,
                        str metric):
    """Scores of q against n rows of X (rows[i], or row i when rows is NULL): dot products (ip,
    cosine) or squared L2 distances, one native call without the GIL."""
    cdef Py_ssize_t d = X.shape[1]
    if q.shape[0] != d:
        raise ValueError("query dimension does not match")
    out = np.empty(n, dtype=np.float32)
    if n == 0:
        return out
    cdef float[::1] o = out
    cdef bint l2 = metric == "l2"
    with nogil:
        if l2:
            hs_l2sq_rows(&X[0, 0], d, rows, n, 0, &q[0], &o[0])
        else:
            hs_dot_rows(&X[0, 0], d, rows, n, 0, &q[0], &o[0])
    return out


def scores_rows(const float[:, ::1] X, const float[::1] q, str metric):
    """Dot products (ip, cosine) or squared L2 distances of q to every row of X."""
    return _row_scores(X, NULL, X.shape[0], q, metric)


def scores_rows_at(const float[:, ::1] X, const int64_t[::1] rows, const float[::1] q, str metric):
    """scores_rows over the listed rows of X, read in place (no gathered copy); a row number
    outside X raises IndexError before any is read."""
    cdef Py_ssize_t i, n = rows.shape[0], nx = X.shape[0]
    cdef bint bad = False
    with nogil:
        for i in range(n):
            if rows[i] < 0 or rows[i] >= nx:
                bad = True
                break
    if bad:
        raise IndexError("scores_rows_at: a row number outside the vector block")
    return _row_scores(X, &rows[0] if n else NULL, n, q, metric)


def scores_rows_i8(const int8_t[:, ::1] C, const float[::1] q):
    """q . c for every int8 code row c of C (the quantized HNSW graph's traversal product)."""
    cdef Py_ssize_t n = C.shape[0], d = C.shape[1]
    if q.shape[0] != d:
        raise ValueError("query dimension does not match")
    out = np.empty(n, dtype=np.float32)
    if n == 0 or d == 0:
        out[:] = 0
        return out
    cdef float[::1] o = out
    with nogil:
        hs_dot_i8_rows(&C[0, 0], d, NULL, n, 0, &q[0], &o[0])
    return out


def topk(const float[::1] scores, Py_ssize_t k):
    """Exact top-k of a score array: (scores, indices), best first, ties to the lower index."""
    out_s = np.empty(k, dtype=np.float32)
    out_i = np.empty(k, dtype=np.int64)
    if k == 0:
        return out_s, out_i
    cdef float[::1] os = out_s
    cdef int64_t[::1] oi = out_i
    cdef Py_ssize_t n = scores.shape[0]
    cdef const float *sp = &scores[0] if n > 0 else NULL
    with nogil:
        hs_topk_f32(sp, n, k, &os[0], &oi[0])
    return out_s, out_i


def stream_sum(const float[::1] x):
    """Sum of x read at full memory bandwidth (used to measure GB/s)."""
    cdef Py_ssize_t n = x.shape[0]
    cdef double r = 0
    if n == 0:
        return 0.0
    with nogil:
        r = hs_stream_sum(&x[0], n)
    return r


def popcount(const uint64_t[::1] bits):
    """Number of set bits."""
    cdef Py_ssize_t nw = bits.shape[0]
    cdef int64_t c = 0
    if nw == 0:
        return 0
    if <int64_t>nw * 64 >= NOGIL_MIN_WORK:
        with nogil:
            c = hs_bitset_popcount(&bits[0], nw)
    else:
        c = hs_bitset_popcount(&bits[0], nw)
    return c


def bitset_to_indices(const uint64_t[::1] bits, Py_ssize_t limit):
    """Positions of the set bits in ascending order, at most `limit` of them."""
    cdef Py_ssize_t nw = bits.shape[0]
    if nw == 0 or limit <= 0:
        return np.empty(0, dtype=np.int64)
    cdef int64_t total = popcount(bits)
    if limit > total:
        limit = total
    out = np.empty(limit, dtype=np.int64)
    if limit == 0:
        return out
    cdef int64_t[::1] o = out
    cdef int64_t c
    if <int64_t>nw * 64 >= NOGIL_MIN_WORK:
        with nogil:
            c = hs_bitset_to_indices(&bits[0], nw, limit, &o[0])
    else:
        c = hs_bitset_to_indices(&bits[0], nw, limit, &o[0])
    return out[:c]


cdef const void *_column_ptr(object arr, object dtype, Py_ssize_t n) except? NULL:
    if not isinstance(arr, np.ndarray) or arr.dtype != dtype or not arr.flags.c_contiguous:
        raise ValueError("filter column must be a contiguous %s array" % np.dtype(dtype))
    if arr.shape[0] < n:
        raise ValueError("filter column is shorter than the rows")
    return cnp.PyArray_DATA(<cnp.ndarray>arr)


def filter_eval(list program, Py_ssize_t n, live):
    """Runs a compiled filter program over rows [0, n); returns a uint64 bitset.

    Each instruction is (op, cmp, nargs, column, present, ival, fval, table, bits);
    the result is ANDed with `live` (a bitset, or None for all rows).
    """
    cdef Py_ssize_t nprog = len(program), i
    cdef Py_ssize_t nw = (n + 63) // 64
    out = np.zeros(max(nw, 1), dtype=np.uint64)
    if nprog == 0:
        raise ValueError("empty filter program")
    cdef hs_filter_instr *prog = <hs_filter_instr *>malloc(nprog * sizeof(hs_filter_instr))
    if prog == NULL:
        raise MemoryError()
    cdef const uint64_t *lp = NULL
    cdef uint64_t[::1] o = out
    cdef int rc
    try:
        for i in range(nprog):
            op, cmp, nargs, col, present, ival, fval, table, bits = program[i]
            prog[i].op = op
            prog[i].cmp = cmp
            prog[i].nargs = nargs
            prog[i].col = NULL
            prog[i].present = NULL
            prog[i].ival = ival
            prog[i].fval = fval
            prog[i].table = NULL
            prog[i].table_len = 0
            prog[i].bits = NULL
            if op == HS_F_I64:
                prog[i].col = _column_ptr(col, np.int64, n)
            elif op == HS_F_F64:
                prog[i].col = _column_ptr(col, np.float64, n)
            elif op == HS_F_CODE:
                prog[i].col = _column_ptr(col, np.int32, n)
                prog[i].table = <const uint8_t *>_column_ptr(table, np.uint8, 0)
                prog[i].table_len = table.shape[0]
            elif op == HS_F_BITS:
                prog[i].bits = <const uint64_t *>_column_ptr(bits, np.uint64, nw)
            if present is not None:
                prog[i].present = <const uint8_t *>_column_ptr(present, np.uint8, n)
            elif op == HS_F_PRESENT:
                raise ValueError("HS_F_PRESENT needs a presence column")
        if live is not None:
            lp = <const uint64_t *>_column_ptr(live, np.uint64, nw)
        if <int64_t>n * nprog >= NOGIL_MIN_WORK:
            with nogil:
                rc = hs_filter_eval(prog, nprog, n, lp, &o[0])
        else:
            rc = hs_filter_eval(prog, nprog, n, lp, &o[0])
        _check(rc)
    finally:
        free(prog)
    return out[:nw] if nw > 0 else out[:0]


include "hnsw.pxi"

include "invindex.pxi"

include "hits.pxi"

include "hash.pxi"

include "lexicon.pxi"

include "rwlock.pxi"

include "find.pxi"

include "maxsim.pxi"
include "sparse.pxi"
include "rabitq.pxi"
include "ingest.pxi"
