# MaxSim over a token store (kernels/hs_maxsim.c). The store's arrays belong to
# hybridsearch/engine/multivector.py; these wrappers check their shapes against each other
# before C reads them, and release the GIL around the kernel.

MAXSIM_MAX_ROWS = HS_MAXSIM_MAX_ROWS


cdef int _mv_store(hs_mv_store *st, const float[:, ::1] rows, const float[::1] inv_norm,
                   const float[::1] sq_norm, const int64_t[::1] row_slot,
                   const int64_t[::1] slot_off, const int32_t[::1] slot_cnt) except -1:
    cdef Py_ssize_t n = row_slot.shape[0]
    if rows.shape[1] <= 0:
        raise ValueError("token rows need a dimension >= 1")
    if rows.shape[0] < n or inv_norm.shape[0] < n or sq_norm.shape[0] < n:
        raise ValueError("the token rows and their norms are shorter than row_slot")
    if slot_off.shape[0] != slot_cnt.shape[0]:
        raise ValueError("slot_off and slot_cnt differ in length")
    st.rows = &rows[0, 0] if rows.shape[0] > 0 else NULL
    st.inv_norm = &inv_norm[0] if inv_norm.shape[0] > 0 else NULL
    st.sq_norm = &sq_norm[0] if sq_norm.shape[0] > 0 else NULL
    st.row_slot = &row_slot[0] if n > 0 else NULL
    st.slot_off = &slot_off[0] if slot_off.shape[0] > 0 else NULL
    st.slot_cnt = &slot_cnt[0] if slot_cnt.shape[0] > 0 else NULL
    st.n_rows = n
    st.n_slots = slot_off.shape[0]
    st.d = rows.shape[1]
    return 0


cdef int _mv_query(const float[:, ::1] Q, Py_ssize_t d, str metric) except -1:
    if metric not in METRICS:
        raise ValueError("unknown metric %r" % metric)
    if Q.shape[0] < 1:
        raise ValueError("a MaxSim query needs at least one row")
    if Q.shape[1] != d:
        raise ValueError("query dimension %d does not match %d" % (Q.shape[1], d))
    return 0


def maxsim_top_k(const float[:, ::1] rows, const float[::1] inv_norm, const float[::1] sq_norm,
                 const int64_t[::1] row_slot, const int64_t[::1] slot_off,
                 const int32_t[::1] slot_cnt, const float[:, ::1] Q, str metric,
                 const uint64_t[::1] bits, Py_ssize_t k):
    """Exact MaxSim top-k of Q over the live slots of a token store (only those set in `bits`
    unless it is None): (scores float32, slots int64), best first, ties to the lower slot,
    as many as were found (at most k)."""
    cdef hs_mv_store st
    _mv_store(&st, rows, inv_norm, sq_norm, row_slot, slot_off, slot_cnt)
    _mv_query(Q, st.d, metric)
    if k < 0:
        raise ValueError("k must be >= 0")
    scores = np.empty(k, dtype=np.float32)
    slots = np.empty(k, dtype=np.int64)
    if k == 0:
        return scores, slots
    cdef float[::1] s = scores
    cdef int64_t[::1] o = slots
    cdef int m = METRICS[metric]
    cdef const uint64_t *bp = NULL
    cdef int64_t nw = 0, kept = 0
    cdef int rc
    if bits is not None:
        nw = bits.shape[0]
        if nw > 0:
            bp = &bits[0]
        else:
            return scores[:0], slots[:0]
    if <int64_t>st.n_rows * st.d * Q.shape[0] >= NOGIL_MIN_WORK:
        with nogil:
            rc = hs_maxsim_top_k(&st, &Q[0, 0], Q.shape[0], m, bp, nw, k, &s[0], &o[0], &kept)
    else:
        rc = hs_maxsim_top_k(&st, &Q[0, 0], Q.shape[0], m, bp, nw, k, &s[0], &o[0], &kept)
    _check(rc)
    return scores[:kept], slots[:kept]


def maxsim_of(const float[:, ::1] rows, const float[::1] inv_norm, const float[::1] sq_norm,
              const int64_t[::1] row_slot, const int64_t[::1] slot_off,
              const int32_t[::1] slot_cnt, const int64_t[::1] slots, const float[:, ::1] Q,
              str metric):
    """Exact MaxSim of Q against each listed slot (float32; NaN where a slot holds nothing)."""
    cdef hs_mv_store st
    _mv_store(&st, rows, inv_norm, sq_norm, row_slot, slot_off, slot_cnt)
    _mv_query(Q, st.d, metric)
    cdef Py_ssize_t n = slots.shape[0]
    out = np.empty(n, dtype=np.float32)
    if n == 0:
        return out
    cdef float[::1] o = out
    cdef int m = METRICS[metric]
    cdef int rc
    with nogil:
        rc = hs_maxsim_of(&st, &slots[0], n, &Q[0, 0], Q.shape[0], m, &o[0])
    _check(rc)
    return out
