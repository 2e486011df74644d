# InvertedIndex: the Python face of kernels/hs_invindex.c (included into _kernels.pyx).

cdef int32_t _EMPTY_I32[1]
cdef float _EMPTY_F32[1]
cdef int64_t _EMPTY_I64[1]


cdef cnp.ndarray _flat(object arrays, str name, object dtype, Py_ssize_t n):
    """arrays[name] if it is a 1-d, C-contiguous, aligned array of dtype with n entries (n < 0: any)."""
    try:
        a = arrays[name]
    except KeyError:
        raise ValueError("the inverted index arrays lack %r" % name) from None
    if not isinstance(a, np.ndarray):
        raise ValueError("%s must be a numpy array, not %s" % (name, type(a).__name__))
    if a.dtype != np.dtype(dtype):
        raise ValueError("%s must be %s in native byte order, not %s" % (name, np.dtype(dtype).name, a.dtype))
    if a.ndim != 1:
        raise ValueError("%s must be 1-d, not of shape %s" % (name, a.shape))
    if not (a.flags.c_contiguous and a.flags.aligned):
        raise ValueError("%s must be contiguous and aligned (attach reads it in place)" % name)
    if n >= 0 and a.shape[0] != n:
        raise ValueError("%s has %d entries where %d were expected" % (name, a.shape[0], n))
    return <cnp.ndarray>a


cdef int64_t _flat_scalar(object arrays, str name) except? -1:
    """A scalar stored as a 1-element (or 0-d) int64 array."""
    try:
        a = arrays[name]
    except KeyError:
        raise ValueError("the inverted index arrays lack %r" % name) from None
    if not isinstance(a, np.ndarray) or a.dtype != np.dtype(np.int64) or a.size != 1:
        raise ValueError("%s must be a 1-element int64 array" % name)
    return int(a.reshape(-1)[0])


cdef class InvertedIndex:
    """One mutable inverted index (one text field): slots -> term ids, exact BM25 top-k."""
    cdef hs_inv *ix
    cdef object _held  # the arrays an attached index reads in place; must outlive ix

    def __cinit__(self):
        self.ix = hs_inv_new()
        if self.ix == NULL:
            raise MemoryError("could not allocate the inverted index")

    def __dealloc__(self):
        if self.ix != NULL:
            hs_inv_free(self.ix)
            self.ix = NULL

    def add(self, const int64_t[::1] slots, const int32_t[::1] tids, const int64_t[::1] offs):
        """Indexes document i = slot slots[i] with terms tids[offs[i]:offs[i+1]] (replacing it)."""
        cdef Py_ssize_t n = slots.shape[0]
        if offs.shape[0] != n + 1:
            raise ValueError("offs needs one more entry than slots")
        if n == 0:
            return
        if offs[0] != 0 or offs[n] != tids.shape[0]:
            raise ValueError("offs must start at 0 and end at len(tids)")
        cdef const int32_t *tp = &tids[0] if tids.shape[0] else _EMPTY_I32
        cdef int rc
        with nogil:
            rc = hs_inv_add(self.ix, &slots[0], n, tp, &offs[0])
        _check(rc)

    def remove(self, const int64_t[::1] slots):
        """Drops the documents of these slots (absent ones are ignored)."""
        if slots.shape[0] == 0:
            return
        cdef int rc
        with nogil:
            rc = hs_inv_remove(self.ix, &slots[0], slots.shape[0])
        _check(rc)  # ENOMEM: copying a borrowed posting list failed (that document stays)

    def search(self, const int32_t[::1] terms, const float[::1] weights, Py_ssize_t k, float k1=1.2,
               float b=0.75, const uint64_t[::1] bits=None, bint exhaustive=False):
        """Exact BM25 top-k -> (scores float32 (k,), slots int64 (k,)), padded with -inf / -1."""
        if terms.shape[0] != weights.shape[0]:
            raise ValueError("one weight per term")
        if k < 0:
            raise ValueError("k must be >= 0")
        scores = np.empty(k, dtype=np.float32)
        slots = np.empty(k, dtype=np.int64)
        if k == 0:
            return scores, slots
        cdef float[::1] s = scores
        cdef int64_t[::1] r = slots
        cdef const int32_t *tp = &terms[0] if terms.shape[0] else _EMPTY_I32
        cdef const float *wp = &weights[0] if weights.shape[0] else _EMPTY_F32
        cdef const uint64_t *bp = &bits[0] if bits is not None and bits.shape[0] else NULL
        cdef int64_t nbits = bits.shape[0] * 64 if bits is not None else 0
        cdef int64_t got
        if bits is not None and bits.shape[0] == 0:
            scores[:] = -np.inf
            slots[:] = -1
            return scores, slots
        with nogil:
            got = hs_inv_search(self.ix, tp, wp, terms.shape[0], k, k1, b, bp, nbits, exhaustive,
                                &s[0], &r[0])
        if got < 0:
            _check(<int>got)
        return scores, slots

    def score(self, const int32_t[::1] terms, const float[::1] weights, const int64_t[::1] slots,
              float k1=1.2, float b=0.75):
        """BM25 of the given slots (0 where none of the terms occur)."""
        out = np.zeros(slots.shape[0], dtype=np.float32)
        if slots.shape[0] == 0 or terms.shape[0] == 0:
            return out
        cdef float[::1] o = out
        with nogil:
            hs_inv_score(self.ix, &terms[0], &weights[0], terms.shape[0], k1, b, &slots[0],
                         slots.shape[0], &o[0])
        return out

    def matches(self, const int32_t[::1] terms, const uint64_t[::1] bits=None):
        """Slots holding at least one of the terms (and set in bits), ascending."""
        if terms.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        cdef int64_t total = 0
        cdef const uint64_t *bp = &bits[0] if bits is not None and bits.shape[0] else NULL
        cdef int64_t nbits = bits.shape[0] * 64 if bits is not None else 0
        if bits is not None and bits.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        cdef int64_t got = hs_inv_matches(self.ix, &terms[0], terms.shape[0], bp, nbits, _EMPTY_I64, 0, &total)
        if got < 0:
            _check(<int>got)
        out = np.empty(max(total, 1), dtype=np.int64)
        cdef int64_t[::1] o = out
        got = hs_inv_matches(self.ix, &terms[0], terms.shape[0], bp, nbits, &o[0], total, &total)
        if got < 0:
            _check(<int>got)
        return out[:got]

    def count(self, const int32_t[::1] terms, const uint64_t[::1] bits=None):
        """How many slots hold at least one of the terms (and are set in bits)."""
        if terms.shape[0] == 0 or (bits is not None and bits.shape[0] == 0):
            return 0
        cdef int64_t total = 0
        cdef const uint64_t *bp = &bits[0] if bits is not None else NULL
        cdef int64_t nbits = bits.shape[0] * 64 if bits is not None else 0
        cdef int64_t got
        with nogil:
            got = hs_inv_matches(self.ix, &terms[0], terms.shape[0], bp, nbits, _EMPTY_I64, 0, &total)
        if got < 0:
            _check(<int>got)
        return total

    @property
    def docs(self):
        """Documents with at least one token (BM25's N)."""
        return hs_inv_docs(self.ix)

    @property
    def nbytes(self):
        """Bytes of the postings and forward lists (allocated)."""
        return hs_inv_nbytes(self.ix)

    @property
    def borrowed_nbytes(self):
        """Bytes of postings and forward lists still read in place from attached arrays."""
        return hs_inv_borrowed_nbytes(self.ix)

    def export(self):
        """The index as flat arrays, which attach() takes back without copying the postings.

        -> dict of 1-d arrays: term_off int64 (nterms+1), post_doc / post_tf int32 (P),
        term_max_tf / term_min_dl int32 (nterms), slot_off int64 (nslots+1), fwd_tid /
        fwd_tf int32 (P), doc_len int32 (nslots), pos_off int64 (nslots+1) and fwd_pos uint8 (the
        token positions of each slot), and the scalars n_docs and total_len as 1-element int64
        arrays (1-d, so they survive np.frombuffer). See hs_invindex.h."""
        cdef hs_inv_flat f
        hs_inv_export_sizes(self.ix, &f)
        out = {
            "term_off": np.empty(f.nterms + 1, dtype=np.int64),
            "post_doc": np.empty(f.npost, dtype=np.int32),
            "post_tf": np.empty(f.npost, dtype=np.int32),
            "term_max_tf": np.empty(f.nterms, dtype=np.int32),
            "term_min_dl": np.empty(f.nterms, dtype=np.int32),
            "slot_off": np.empty(f.nslots + 1, dtype=np.int64),
            "fwd_tid": np.empty(f.npost, dtype=np.int32),
            "fwd_tf": np.empty(f.npost, dtype=np.int32),
            "doc_len": np.empty(f.nslots, dtype=np.int32),
            "pos_off": np.empty(f.nslots + 1, dtype=np.int64),
            "fwd_pos": np.empty(f.npos, dtype=np.uint8),
            "n_docs": np.array([f.N], dtype=np.int64),
            "total_len": np.array([f.total], dtype=np.int64),
        }
        f.term_off = <int64_t *>cnp.PyArray_DATA(out["term_off"])
        f.post_doc = <int32_t *>cnp.PyArray_DATA(out["post_doc"])
        f.post_tf = <int32_t *>cnp.PyArray_DATA(out["post_tf"])
        f.term_max_tf = <int32_t *>cnp.PyArray_DATA(out["term_max_tf"])
        f.term_min_dl = <int32_t *>cnp.PyArray_DATA(out["term_min_dl"])
        f.slot_off = <int64_t *>cnp.PyArray_DATA(out["slot_off"])
        f.fwd_tid = <int32_t *>cnp.PyArray_DATA(out["fwd_tid"])
        f.fwd_tf = <int32_t *>cnp.PyArray_DATA(out["fwd_tf"])
        f.doc_len = <int32_t *>cnp.PyArray_DATA(out["doc_len"])
        f.pos_off = <int64_t *>cnp.PyArray_DATA(out["pos_off"])
        f.fwd_pos = <uint8_t *>cnp.PyArray_DATA(out["fwd_pos"])
        cdef int rc
        with nogil:
            rc = hs_inv_export(self.ix, &f)
        _check(rc)
        return out

    @staticmethod
    def attach(arrays):
        """An index reading the arrays of export() in place (e.g. views of a mapped file).

        Nothing is copied: the arrays are kept referenced for the life of the index and
        never written (the first write to a posting list copies that list), so read-only
        arrays are fine. Everything is validated first; malformed arrays raise ValueError.
        Keys export() does not make are ignored."""
        cdef cnp.ndarray term_off = _flat(arrays, "term_off", np.int64, -1)
        cdef cnp.ndarray slot_off = _flat(arrays, "slot_off", np.int64, -1)
        cdef cnp.ndarray post_doc = _flat(arrays, "post_doc", np.int32, -1)
        cdef cnp.ndarray fwd_pos = _flat(arrays, "fwd_pos", np.uint8, -1)
        if term_off.shape[0] < 1 or slot_off.shape[0] < 1:
            raise ValueError("term_off and slot_off need at least one entry (the end offset)")
        cdef hs_inv_flat f
        f.nterms = term_off.shape[0] - 1
        f.nslots = slot_off.shape[0] - 1
        f.npost = post_doc.shape[0]
        f.npos = fwd_pos.shape[0]
        f.N = _flat_scalar(arrays, "n_docs")
        f.total = _flat_scalar(arrays, "total_len")
        held = {
            "term_off": term_off, "post_doc": post_doc, "slot_off": slot_off,
            "post_tf": _flat(arrays, "post_tf", np.int32, f.npost),
            "term_max_tf": _flat(arrays, "term_max_tf", np.int32, f.nterms),
            "term_min_dl": _flat(arrays, "term_min_dl", np.int32, f.nterms),
            "fwd_tid": _flat(arrays, "fwd_tid", np.int32, f.npost),
            "fwd_tf": _flat(arrays, "fwd_tf", np.int32, f.npost),
            "doc_len": _flat(arrays, "doc_len", np.int32, f.nslots),
            "pos_off": _flat(arrays, "pos_off", np.int64, f.nslots + 1),
            "fwd_pos": fwd_pos,
        }
        f.term_off = <int64_t *>cnp.PyArray_DATA(term_off)
        f.post_doc = <int32_t *>cnp.PyArray_DATA(post_doc)
        f.post_tf = <int32_t *>cnp.PyArray_DATA(held["post_tf"])
        f.term_max_tf = <int32_t *>cnp.PyArray_DATA(held["term_max_tf"])
        f.term_min_dl = <int32_t *>cnp.PyArray_DATA(held["term_min_dl"])
        f.slot_off = <int64_t *>cnp.PyArray_DATA(slot_off)
        f.fwd_tid = <int32_t *>cnp.PyArray_DATA(held["fwd_tid"])
        f.fwd_tf = <int32_t *>cnp.PyArray_DATA(held["fwd_tf"])
        f.doc_len = <int32_t *>cnp.PyArray_DATA(held["doc_len"])
        f.pos_off = <int64_t *>cnp.PyArray_DATA(held["pos_off"])
        f.fwd_pos = <uint8_t *>cnp.PyArray_DATA(fwd_pos) if f.npos else <uint8_t *>_EMPTY_I32
        cdef int err = HS_OK
        cdef const char *why = NULL
        cdef hs_inv *ix
        with nogil:
            ix = hs_inv_attach(&f, &err, &why)
        if ix == NULL:
            if err == HS_ENOMEM:
                raise MemoryError("could not allocate the attached inverted index")
            raise ValueError("not a valid inverted index: %s" % (why.decode() if why != NULL else "rejected"))
        cdef InvertedIndex self = InvertedIndex.__new__(InvertedIndex)
        hs_inv_free(self.ix)
        self.ix = ix
        self._held = held
        return self

    @property
    def total_len(self):
        """Tokens over all documents."""
        return hs_inv_total_len(self.ix)

    def df(self, int32_t term):
        """Documents containing the term."""
        return hs_inv_df(self.ix, term)


def search_best_fields(list indexes, list terms, list weights, Py_ssize_t k, float k1=1.2,
                       float b=0.75, const uint64_t[::1] bits=None):
    """Best-fields BM25 top-k over several InvertedIndex (one per text field) in one call:
    field i is queried with terms[i] (int32) weighted by weights[i] (float32).
    -> (scores float32 (k,), slots int64 (k,)) best first, padded with -inf / -1."""
    cdef Py_ssize_t nf = len(indexes), f
    if len(terms) != nf or len(weights) != nf:
        raise ValueError("one terms and one weights array per index")
    if k < 0:
        raise ValueError("k must be >= 0")
    scores = np.empty(k, dtype=np.float32)
    slots = np.empty(k, dtype=np.int64)
    if k == 0:
        return scores, slots
    if bits is not None and bits.shape[0] == 0:
        scores[:] = -np.inf
        slots[:] = -1
        return scores, slots
    held = []  # keeps the contiguous term arrays alive while C reads them
    cdef const hs_inv **ixs = <const hs_inv **>malloc(max(nf, 1) * sizeof(hs_inv *))
    cdef const int32_t **tps = <const int32_t **>malloc(max(nf, 1) * sizeof(int32_t *))
    cdef const float **wps = <const float **>malloc(max(nf, 1) * sizeof(float *))
    cdef int64_t *nqs = <int64_t *>malloc(max(nf, 1) * sizeof(int64_t))
    cdef InvertedIndex ix
    cdef cnp.ndarray t, w
    cdef float[::1] s = scores
    cdef int64_t[::1] r = slots
    cdef const uint64_t *bp = &bits[0] if bits is not None else NULL
    cdef int64_t nbits = bits.shape[0] * 64 if bits is not None else 0
    cdef int64_t got
    try:
        if ixs == NULL or tps == NULL or wps == NULL or nqs == NULL:
            raise MemoryError("could not allocate the field table")
        for f in range(nf):
            ix = <InvertedIndex?>indexes[f]
            t = np.ascontiguousarray(terms[f], dtype=np.int32)
            w = np.ascontiguousarray(weights[f], dtype=np.float32)
            if t.ndim != 1 or w.ndim != 1 or t.shape[0] != w.shape[0]:
                raise ValueError("field %d: one weight per term" % f)
            held.append((t, w))
            ixs[f] = ix.ix
            tps[f] = <const int32_t *>cnp.PyArray_DATA(t) if t.shape[0] else _EMPTY_I32
            wps[f] = <const float *>cnp.PyArray_DATA(w) if w.shape[0] else _EMPTY_F32
            nqs[f] = t.shape[0]
        with nogil:
            got = hs_inv_search_best(ixs, nf, tps, wps, nqs, k, k1, b, bp, nbits, &s[0], &r[0])
        if got < 0:
            _check(<int>got)
        return scores, slots
    finally:
        free(ixs)
        free(tps)
        free(wps)
        free(nqs)


CLAUSE_KINDS = {"term": HS_CL_TERM, "phrase": HS_CL_PHRASE, "any": HS_CL_ANY}
OCCURS = {"should": HS_OCCUR_SHOULD, "must": HS_OCCUR_MUST, "must_not": HS_OCCUR_MUST_NOT}


def query_best_fields(list indexes, list clauses, k, float k1=1.2, float b=0.75,
                      const uint64_t[::1] bits=None):
    """A boolean query over several InvertedIndex (one per text field) in one call; see
    hs_inv_query in hs_invindex.h. clauses[i] lists field i's clauses as (kind, occur, terms,
    weight): kind "term" (one term id), "phrase" (term ids in order) or "any" (term ids: a
    constant score `weight` when the document holds one), occur "should", "must" or "must_not".
    k an int: -> (scores float32 (k,), slots int64 (k,), total) best first, padded with -inf / -1;
    total is the number of matches for k = 0 and -1 for k > 0 (a top-k search skips documents
    that cannot enter it, so it does not count them); k None: -> (slots int64, scores float32)
    of every match, ascending by slot."""
    cdef Py_ssize_t nf = len(indexes), f, i, n, total_cl = 0
    if len(clauses) != nf:
        raise ValueError("one list of clauses per index")
    cdef int64_t kk = -1 if k is None else k
    if k is not None and k < 0:
        raise ValueError("k must be >= 0")
    for f in range(nf):
        total_cl += len(clauses[f])
    held = []  # keeps the contiguous term arrays alive while C reads them
    cdef const hs_inv **ixs = <const hs_inv **>malloc(max(nf, 1) * sizeof(hs_inv *))
    cdef hs_inv_clause **cls = <hs_inv_clause **>malloc(max(nf, 1) * sizeof(hs_inv_clause *))
    cdef hs_inv_clause *pool = <hs_inv_clause *>malloc(max(total_cl, 1) * sizeof(hs_inv_clause))
    cdef int64_t *ncl = <int64_t *>malloc(max(nf, 1) * sizeof(int64_t))
    scores = np.empty(max(kk, 0), dtype=np.float32)
    slots = np.empty(max(kk, 0), dtype=np.int64)
    cdef float *sp = <float *>cnp.PyArray_DATA(scores)
    cdef int64_t *rp = <int64_t *>cnp.PyArray_DATA(slots)
    cdef const uint64_t *bp = &bits[0] if bits is not None and bits.shape[0] else NULL
    cdef int64_t nbits = bits.shape[0] * 64 if bits is not None else 0
    cdef int64_t got, total = 0
    cdef int64_t *all_slot = NULL
    cdef float *all_score = NULL
    cdef InvertedIndex ix
    cdef cnp.ndarray t
    cdef Py_ssize_t used = 0
    try:
        if ixs == NULL or cls == NULL or pool == NULL or ncl == NULL:
            raise MemoryError("could not allocate the clause table")
        for f in range(nf):
            ix = <InvertedIndex?>indexes[f]
            ixs[f] = ix.ix
            cls[f] = pool + used
            ncl[f] = len(clauses[f])
            for kind, occur, terms, weight in clauses[f]:
                t = np.ascontiguousarray(terms, dtype=np.int32)
                if t.ndim != 1:
                    raise ValueError("field %d: a clause's terms must be 1-d" % f)
                held.append(t)
                pool[used].kind = CLAUSE_KINDS[kind]
                pool[used].occur = OCCURS[occur]
                pool[used].terms = <const int32_t *>cnp.PyArray_DATA(t) if t.shape[0] else _EMPTY_I32
                pool[used].nterms = t.shape[0]
                pool[used].weight = weight
                used += 1
        if bits is not None and bits.shape[0] == 0:  # nothing allowed
            if k is None:
                return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
            scores[:] = -np.inf
            slots[:] = -1
            return scores, slots, 0
        with nogil:
            got = hs_inv_query(ixs, nf, <const hs_inv_clause *const *>cls, ncl, k1, b, bp, nbits, kk,
                               sp, rp, &all_slot if kk < 0 else NULL, &all_score if kk < 0 else NULL, &total)
        if got < 0:
            _check(<int>got)
        if k is not None:
            return scores, slots, total
        out_slots = np.empty(got, dtype=np.int64)
        out_scores = np.empty(got, dtype=np.float32)
        if got:
            memcpy(cnp.PyArray_DATA(out_slots), all_slot, got * sizeof(int64_t))
            memcpy(cnp.PyArray_DATA(out_scores), all_score, got * sizeof(float))
        return out_slots, out_scores
    finally:
        free(all_slot)
        free(all_score)
        free(ixs)
        free(cls)
        free(pool)
        free(ncl)
