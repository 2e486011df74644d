# RaBitQ-style codes (kernels/hs_rabitq.c). The arrays belong to hybridsearch/engine/rabitq.py;
# these wrappers check their shapes against each other before C reads them and release the
# GIL around every kernel call.

RQ_NFACT = HS_RQ_NFACT


def rq_dp(Py_ssize_t d):
    """The padded dimension of the codes: d rounded up to a multiple of 64."""
    return hs_rq_dp(d)


def rq_code_bytes(Py_ssize_t d, int bits):
    """Bytes of one code (0 when d < 1 or bits is not 1 or 4)."""
    return hs_rq_code_bytes(d, bits)


cdef int _rq_params(hs_rq_params *p, Py_ssize_t d, int bits, str metric, uint64_t seed,
                    const float[::1] centroid) except -1:
    if hs_rq_code_bytes(d, bits) == 0:
        raise ValueError("codes need d >= 1 and bits 1 or 4")
    if metric not in METRICS:
        raise ValueError("unknown metric %r" % metric)
    if centroid.shape[0] != d:
        raise ValueError("the centroid has %d values, not %d" % (centroid.shape[0], d))
    p.d = d
    p.bits = bits
    p.metric = METRICS[metric]
    p.seed = seed
    p.centroid = &centroid[0]
    return 0


cdef int _rq_codes(const hs_rq_params *p, const uint8_t[:, ::1] codes,
                   const float[:, ::1] factors) except -1:
    if codes.shape[1] != hs_rq_code_bytes(p.d, p.bits):
        raise ValueError("codes rows hold %d bytes, not %d" % (codes.shape[1], hs_rq_code_bytes(p.d, p.bits)))
    if factors.shape[0] != codes.shape[0] or factors.shape[1] != HS_RQ_NFACT:
        raise ValueError("factors must be (%d, %d)" % (codes.shape[0], HS_RQ_NFACT))
    return 0


def rq_rotate(Py_ssize_t d, uint64_t seed, const float[:, ::1] X):
    """P applied to the rows of X (zero-padded to rq_dp(d)): float64 (n, dp)."""
    if X.shape[1] != d or d < 1:
        raise ValueError("rows have dimension %d, not %d" % (X.shape[1], d))
    cdef Py_ssize_t n = X.shape[0]
    out = np.empty((n, hs_rq_dp(d)), dtype=np.float64)
    if n == 0:
        return out
    cdef double[:, ::1] o = out
    cdef int rc
    with nogil:
        rc = hs_rq_rotate(d, seed, &X[0, 0], n, &o[0, 0])
    _check(rc)
    return out


def rq_encode(Py_ssize_t d, int bits, str metric, uint64_t seed, const float[::1] centroid,
              const float[:, ::1] X):
    """(codes uint8 (n, code bytes), factors float32 (n, RQ_NFACT)) of the rows of X."""
    cdef hs_rq_params p
    _rq_params(&p, d, bits, metric, seed, centroid)
    if X.shape[1] != d:
        raise ValueError("rows have dimension %d, not %d" % (X.shape[1], d))
    cdef Py_ssize_t n = X.shape[0]
    codes = np.zeros((n, hs_rq_code_bytes(d, bits)), dtype=np.uint8)
    factors = np.zeros((n, HS_RQ_NFACT), dtype=np.float32)
    if n == 0:
        return codes, factors
    cdef uint8_t[:, ::1] c = codes
    cdef float[:, ::1] f = factors
    cdef int rc
    with nogil:
        rc = hs_rq_encode(&p, &X[0, 0], n, &c[0, 0], &f[0, 0])
    _check(rc)
    return codes, factors


def rq_estimate(Py_ssize_t d, int bits, str metric, uint64_t seed, const float[::1] centroid,
                const uint8_t[:, ::1] codes, const float[:, ::1] factors, const int64_t[::1] rows,
                const float[:, ::1] Q, double eps0):
    """(estimate, probabilistic bound, hard bound), each float32 (nq, len(rows)) (rows None:
    every code row): squared distance (l2) or inner product, and the half-widths of the
    intervals around it that hold the true value."""
    cdef hs_rq_params p
    _rq_params(&p, d, bits, metric, seed, centroid)
    _rq_codes(&p, codes, factors)
    if Q.shape[1] != d:
        raise ValueError("query dimension %d does not match %d" % (Q.shape[1], d))
    cdef Py_ssize_t i, nc = codes.shape[0], n = nc if rows is None else rows.shape[0], nq = Q.shape[0]
    cdef const int64_t *rp = NULL
    if rows is not None:
        for i in range(n):
            if rows[i] < 0 or rows[i] >= nc:
                raise IndexError("a row number outside the codes")
        if n:
            rp = &rows[0]
    est = np.empty((nq, n), dtype=np.float32)
    bp = np.empty((nq, n), dtype=np.float32)
    bh = np.empty((nq, n), dtype=np.float32)
    if n == 0 or nq == 0:
        return est, bp, bh
    cdef float[:, ::1] e = est, a = bp, b = bh
    cdef int rc
    with nogil:
        rc = hs_rq_estimate(&p, &codes[0, 0], &factors[0, 0], rp, n, &Q[0, 0], nq, eps0,
                            &e[0, 0], &a[0, 0], &b[0, 0])
    _check(rc)
    return est, bp, bh


def rq_scan(Py_ssize_t d, int bits, str metric, uint64_t seed, const float[::1] centroid,
            const uint8_t[:, ::1] codes, const float[:, ::1] factors, const float[:, ::1] X,
            const uint64_t[::1] allowed, const float[:, ::1] Q, Py_ssize_t k, bint hard,
            double eps0):
    """Top-k of every query over the code rows (allowed: uint64 bitset or None): (scores
    float32 (nq, k), rows int64 (nq, k), rescored int64 (nq,)). X (row = code row) given: rows
    in doubt are rescored on it (hard: the exact float32 top-k); X None: by the estimate."""
    cdef hs_rq_params p
    _rq_params(&p, d, bits, metric, seed, centroid)
    _rq_codes(&p, codes, factors)
    cdef Py_ssize_t n = codes.shape[0], nq = Q.shape[0]
    if Q.shape[1] != d:
        raise ValueError("query dimension %d does not match %d" % (Q.shape[1], d))
    if k < 0:
        raise ValueError("k must be >= 0")
    if X is not None and (X.shape[0] < n or X.shape[1] != d):
        raise ValueError("the float32 block must hold the %d coded rows of dimension %d" % (n, d))
    if allowed is not None and allowed.shape[0] * 64 < n:
        raise ValueError("the allowed bitset is shorter than the rows")
    scores = np.empty((nq, k), dtype=np.float32)
    ids = np.empty((nq, k), dtype=np.int64)
    rescored = np.zeros(nq, dtype=np.int64)
    if nq == 0 or k == 0:
        return scores, ids, rescored
    cdef float[:, ::1] s = scores
    cdef int64_t[:, ::1] o = ids
    cdef int64_t[::1] rs = rescored
    cdef const uint8_t *cp = &codes[0, 0] if n > 0 else NULL
    cdef const float *fp = &factors[0, 0] if n > 0 else NULL
    cdef const float *xp = NULL
    cdef const uint64_t *bp = NULL
    if X is not None:
        xp = &X[0, 0] if X.shape[0] > 0 else &centroid[0]  # any non-NULL pointer: no row is read
    if allowed is not None:
        if allowed.shape[0] == 0:
            n = 0
        else:
            bp = &allowed[0]
    cdef int rc
    with nogil:
        rc = hs_rq_scan(&p, cp, fp, n, xp, bp, &Q[0, 0], nq, k,
                        HS_RQ_BOUND_HARD if hard else HS_RQ_BOUND_PROB, eps0, &s[0, 0], &o[0, 0], &rs[0])
    _check(rc)
    return scores, ids, rescored
