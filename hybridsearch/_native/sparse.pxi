# SparsePostings: the Python face of kernels/hs_sparse.c (included into _kernels.pyx).
# Arguments are checked for shape and dtype here; the C side checks the values (key order,
# weights) and says what is wrong, so a bad batch is a ValueError and never a crash.

cdef uint64_t _EMPTY_U64[1]

SPARSE_BLOCK = HS_SP_BLOCK
SPARSE_WINDOW = HS_SP_WINDOW


cdef inline const uint64_t *_bits_ptr(const uint64_t[::1] bits):
    """NULL for no filter; a non-NULL pointer (with nbits 0) for an empty one, which allows nothing."""
    if bits is None:
        return NULL
    return &bits[0] if bits.shape[0] else _EMPTY_U64


cdef class SparsePostings:
    """One mutable sparse-vector inverted index: slots -> {key: weight}, exact dot-product top-k
    with block-max MaxScore pruning. Not thread-safe for writes (the caller's lock)."""
    cdef hs_sp *ix

    def __cinit__(self):
        self.ix = hs_sp_new()
        if self.ix == NULL:
            raise MemoryError("could not allocate the sparse index")

    def __dealloc__(self):
        if self.ix != NULL:
            hs_sp_free(self.ix)
            self.ix = NULL

    def add(self, const int64_t[::1] slots, const int64_t[::1] indptr, const int32_t[::1] keys,
            const float[::1] values):
        """Indexes document i = slot slots[i] with keys[indptr[i]:indptr[i+1]] (strictly ascending,
        >= 0) weighted by values[...] (finite, > 0), replacing it; all or nothing."""
        cdef Py_ssize_t n = slots.shape[0]
        if indptr.shape[0] != n + 1:
            raise ValueError("indptr needs one more entry than slots")
        if keys.shape[0] != values.shape[0]:
            raise ValueError("one value per key")
        if indptr[0] != 0 or indptr[n] != keys.shape[0]:
            raise ValueError("indptr must start at 0 and end at len(keys)")
        if n == 0:
            return
        cdef const int32_t *kp = &keys[0] if keys.shape[0] else _EMPTY_I32
        cdef const float *vp = &values[0] if values.shape[0] else _EMPTY_F32
        cdef const char *why = NULL
        cdef int rc
        with nogil:
            rc = hs_sp_add(self.ix, &slots[0], n, &indptr[0], kp, vp, &why)
        if rc == HS_EINVAL:
            raise ValueError(why.decode() if why != NULL else "the sparse batch was rejected")
        _check(rc)

    def remove(self, const int64_t[::1] slots):
        """Drops the documents of these slots (absent ones are ignored)."""
        if slots.shape[0] == 0:
            return
        cdef int rc
        with nogil:
            rc = hs_sp_remove(self.ix, &slots[0], slots.shape[0])
        _check(rc)

    def search(self, const int32_t[::1] keys, const float[::1] values, Py_ssize_t k,
               const uint64_t[::1] bits=None, bint prune=True):
        """Exact top-k -> (scores float32, slots int64, work): the hits best first (at most k,
        ties to the lower slot) and the postings read. prune=False reads every posting of the
        query's keys (the reference for the pruning)."""
        if keys.shape[0] != values.shape[0]:
            raise ValueError("one value per key")
        if k < 0:
            raise ValueError("k must be >= 0")
        scores = np.empty(k, dtype=np.float32)
        slots = np.empty(k, dtype=np.int64)
        cdef float[::1] s = scores
        cdef int64_t[::1] r = slots
        cdef float *sp = &s[0] if k else _EMPTY_F32
        cdef int64_t *rp = &r[0] if k else _EMPTY_I64
        cdef const int32_t *kp = &keys[0] if keys.shape[0] else _EMPTY_I32
        cdef const float *vp = &values[0] if values.shape[0] else _EMPTY_F32
        cdef const uint64_t *bp = _bits_ptr(bits)
        cdef int64_t nbits = bits.shape[0] * 64 if bits is not None else 0
        cdef int64_t got, work = 0
        with nogil:
            got = hs_sp_search(self.ix, kp, vp, keys.shape[0], k, bp, nbits, prune, sp, rp, &work)
        if got == HS_EINVAL:
            raise ValueError("a query's keys must be strictly ascending and >= 0, its weights finite and > 0")
        if got < 0:
            _check(<int>got)
        return scores[:got], slots[:got], work

    def search_batch(self, const int64_t[::1] qptr, const int32_t[::1] keys, const float[::1] values,
                     Py_ssize_t k, const uint64_t[::1] bits=None, int nthreads=1):
        """Queries in CSR form (query i: keys / values [qptr[i]:qptr[i+1]]) in one call on up to
        nthreads threads -> (scores float32 (n, k), slots int64 (n, k)) padded with -inf / -1."""
        cdef Py_ssize_t n = qptr.shape[0] - 1
        if n < 0:
            raise ValueError("qptr needs at least one entry")
        if keys.shape[0] != values.shape[0]:
            raise ValueError("one value per key")
        if qptr[0] != 0 or qptr[n] != keys.shape[0]:
            raise ValueError("qptr must start at 0 and end at len(keys)")
        if k < 0:
            raise ValueError("k must be >= 0")
        scores = np.empty((n, k), dtype=np.float32)
        slots = np.empty((n, k), dtype=np.int64)
        nhits = np.empty(max(n, 1), dtype=np.int64)
        if n == 0 or k == 0:
            return scores, slots
        cdef float[:, ::1] s = scores
        cdef int64_t[:, ::1] r = slots
        cdef int64_t[::1] h = nhits
        cdef const int32_t *kp = &keys[0] if keys.shape[0] else _EMPTY_I32
        cdef const float *vp = &values[0] if values.shape[0] else _EMPTY_F32
        cdef const uint64_t *bp = _bits_ptr(bits)
        cdef int64_t nbits = bits.shape[0] * 64 if bits is not None else 0
        cdef int rc
        with nogil:
            rc = hs_sp_search_batch(self.ix, &qptr[0], n, kp, vp, k, bp, nbits, nthreads, &s[0, 0], &r[0, 0], &h[0])
        if rc == HS_EINVAL:
            raise ValueError("a query's keys must be strictly ascending and >= 0, its weights finite and > 0")
        _check(rc)
        return scores, slots

    def score(self, const int32_t[::1] keys, const float[::1] values, const int64_t[::1] slots):
        """The exact score of each slot (0 where it is not indexed or shares no key)."""
        if keys.shape[0] != values.shape[0]:
            raise ValueError("one value per key")
        out = np.zeros(slots.shape[0], dtype=np.float32)
        if slots.shape[0] == 0:
            return out
        cdef float[::1] o = out
        cdef const int32_t *kp = &keys[0] if keys.shape[0] else _EMPTY_I32
        cdef const float *vp = &values[0] if values.shape[0] else _EMPTY_F32
        cdef int rc
        with nogil:
            rc = hs_sp_score(self.ix, kp, vp, keys.shape[0], &slots[0], slots.shape[0], &o[0])
        if rc == HS_EINVAL:
            raise ValueError("a query's keys must be strictly ascending and >= 0, its weights finite and > 0")
        _check(rc)
        return out

    def matches(self, const int32_t[::1] keys, const uint64_t[::1] bits=None, bint count_only=False):
        """Slots sharing a key with the query (and set in bits), ascending (int64); with
        count_only, their number."""
        cdef const int32_t *kp = &keys[0] if keys.shape[0] else _EMPTY_I32
        cdef const uint64_t *bp = _bits_ptr(bits)
        cdef int64_t nbits = bits.shape[0] * 64 if bits is not None else 0
        cdef int64_t total = 0, got
        with nogil:
            got = hs_sp_matches(self.ix, kp, keys.shape[0], bp, nbits, _EMPTY_I64, 0, &total)
        if got < 0:
            _check(<int>got)
        if count_only:
            return total
        out = np.empty(max(total, 1), dtype=np.int64)
        cdef int64_t[::1] o = out
        with nogil:
            got = hs_sp_matches(self.ix, kp, keys.shape[0], bp, nbits, &o[0], total, &total)
        if got < 0:
            _check(<int>got)
        return out[:got]

    def doc(self, int64_t slot):
        """(keys int32, values float32) of one slot (empty when it is not indexed)."""
        cdef int32_t n = hs_sp_doc(self.ix, slot, NULL, NULL)
        keys = np.empty(n, dtype=np.int32)
        values = np.empty(n, dtype=np.float32)
        if n:
            hs_sp_doc(self.ix, slot, <int32_t *>cnp.PyArray_DATA(keys), <float *>cnp.PyArray_DATA(values))
        return keys, values

    def export(self):
        """(slots int64 ascending, indptr int64, keys int32, values float32): every indexed slot's
        document, what add() takes back."""
        cdef int64_t nd = 0, nnz = 0
        hs_sp_export_sizes(self.ix, &nd, &nnz)
        slots = np.empty(nd, dtype=np.int64)
        indptr = np.empty(nd + 1, dtype=np.int64)
        keys = np.empty(nnz, dtype=np.int32)
        values = np.empty(nnz, dtype=np.float32)
        cdef int rc
        cdef int64_t *sp = <int64_t *>cnp.PyArray_DATA(slots) if nd else _EMPTY_I64
        cdef int64_t *ip = <int64_t *>cnp.PyArray_DATA(indptr)
        cdef int32_t *kp = <int32_t *>cnp.PyArray_DATA(keys) if nnz else _EMPTY_I32
        cdef float *vp = <float *>cnp.PyArray_DATA(values) if nnz else _EMPTY_F32
        with nogil:
            rc = hs_sp_export(self.ix, nd, nnz, sp, ip, kp, vp)
        _check(rc)
        return slots, indptr, keys, values

    @property
    def docs(self):
        """Slots with at least one key."""
        return hs_sp_docs(self.ix)

    @property
    def nnz(self):
        """Postings (stored (slot, key) pairs)."""
        return hs_sp_nnz(self.ix)

    @property
    def keys(self):
        """Distinct keys with at least one posting."""
        return hs_sp_keys(self.ix)

    @property
    def nbytes(self):
        """Bytes allocated (postings, block maxima, forward lists, key table)."""
        return hs_sp_nbytes(self.ix)
