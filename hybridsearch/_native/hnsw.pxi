# HnswIndex: the Python face of kernels/hs_hnsw.c (included into _kernels.pyx).

HNSW_PLAIN = HS_HNSW_PLAIN
HNSW_TWOHOP = HS_HNSW_TWOHOP
_HNSW_METRICS = {"ip": HS_METRIC_IP, "cosine": HS_METRIC_COSINE, "l2": HS_METRIC_L2}
_QUANT = {"none": HS_HNSW_Q_NONE, "int8": HS_HNSW_Q_INT8, "rabitq1": HS_HNSW_Q_RQ1, "rabitq4": HS_HNSW_Q_RQ4}
QUANTIZATIONS = tuple(_QUANT)  # by their number in the kernel: QUANTIZATIONS[meta["quant"]]
HNSW_RESCORE_EPS = HS_HNSW_RESCORE_EPS


hs_malloc_tune()  # large blocks in mappings of their own: freed memory goes back (hs_hnsw.h)

# The RaBitQ codes' format in snapshots: the rotation (HS_HNSW_RQ_SEED, HS_RQ_ROUNDS), the code
# layout and the six factors. Any change to those makes old codes meaningless (not damaged: every
# check would pass and the walk would rank at random), so it must come with a new number here.
# Snapshots written before the field existed hold format 1.
RQ_FORMAT = 1
_ONE_VISIT = np.zeros(1, dtype=np.int64)  # unused out-argument when visits are not asked for
_ONE_BYTE = np.zeros(64, dtype=np.uint8)  # a valid pointer for empty arrays


cdef int64_t _rq_row_bytes(int64_t d, int quant):
    """Bytes of a RaBitQ graph's row per node: the code, then its float factors."""
    return hs_rq_code_bytes(d, 1 if quant == HS_HNSW_Q_RQ1 else 4) + 4 * HS_RQ_CTX_NFACT


cdef object _view(object owner, void *ptr, int typenum, int64_t rows, int64_t cols):
    """A numpy view of `rows` (x `cols`) items at ptr, keeping `owner` alive."""
    cdef cnp.npy_intp dims[2]
    dims[0] = rows
    dims[1] = cols
    if ptr == NULL or rows == 0:
        shape = (<object>rows, <object>cols) if cols else (<object>rows,)
        return np.zeros(shape, dtype=cnp.PyArray_TypeObjectFromType(typenum))
    arr = cnp.PyArray_SimpleNewFromData(2 if cols else 1, dims, typenum, ptr)
    cnp.set_array_base(arr, owner)
    return arr


cdef void *_data(cnp.ndarray a):
    return cnp.PyArray_DATA(a) if a.size else <void *>cnp.PyArray_DATA(_ONE_BYTE)


cdef class HnswIndex:
    """One mutable HNSW graph whose node ids are rows ("slots") of the caller's vector block.

    The vectors stay with the caller: every call takes the float32 C-contiguous
    (rows, dim) block X (row == slot). metric is "ip", "cosine" (the vectors as they
    are, each scaled by its inverse norm; queries must be unit length) or "l2". Searches may run concurrently; add/remove/repair need the
    caller's exclusive lock.
    """
    cdef hs_hnsw *g
    cdef readonly int64_t dim
    cdef readonly str metric
    cdef readonly int m
    cdef readonly int ef_construct
    cdef readonly str quantization
    cdef int64_t cap
    cdef int64_t high  # 1 + highest slot ever added
    cdef object _borrowed  # arrays an attached graph points into: alive as long as the graph

    def __cinit__(self, int64_t dim, str metric="ip", int m=16, int ef_construct=200,
                  uint64_t seed=0x5EED, str quantization="none"):
        if metric not in _HNSW_METRICS:
            raise ValueError("metric must be 'ip', 'cosine' or 'l2'")
        if quantization not in _QUANT:
            raise ValueError("quantization must be 'none', 'int8', 'rabitq1' or 'rabitq4'")
        if dim < 1 or m < 2 or m > 512 or ef_construct < 1:
            raise ValueError("need dim >= 1, 2 <= m <= 512, ef_construct >= 1")
        self.g = hs_hnsw_new(dim, _HNSW_METRICS[metric], m, ef_construct, seed, _QUANT[quantization])
        if self.g == NULL:
            raise MemoryError("could not allocate the HNSW graph")
        self.dim, self.metric, self.m, self.ef_construct = dim, metric, m, ef_construct
        self.quantization = quantization
        self.cap = 0
        self.high = 0

    def __dealloc__(self):
        if self.g != NULL:
            hs_hnsw_free(self.g)
            self.g = NULL

    cdef _check_block(self, const float[:, ::1] X, int64_t rows):
        if X.shape[1] != self.dim:
            raise ValueError("vector block has dimension %d, the graph %d" % (X.shape[1], self.dim))
        if X.shape[0] < rows:
            raise ValueError("vector block has %d rows, the graph needs %d" % (X.shape[0], rows))

    def reserve(self, int64_t capacity):
        """Room for slots [0, capacity)."""
        if capacity > self.cap:
            _check(hs_hnsw_reserve(self.g, capacity))
            self.cap = capacity

    def add(self, const float[:, ::1] X, const int64_t[::1] slots, int threads=1):
        """Inserts (or re-links, if already nodes) the given rows of X, on `threads` threads."""
        cdef Py_ssize_t n = slots.shape[0]
        if n == 0:
            return
        cdef int64_t hi = -1
        cdef Py_ssize_t i
        for i in range(n):
            if slots[i] < 0:
                raise ValueError("slots must be >= 0")
            if slots[i] > hi:
                hi = slots[i]
        self._check_block(X, max(hi + 1, self.high))
        if hi >= self.cap:
            # a quarter more, not double: the links and codes of unused capacity are resident
            # (zeroed), 60 % of the graph's bytes after a doubling at 1M; realloc copies stay O(n)
            self.reserve(max(hi + 1, self.cap + self.cap // 4, 1024))
        cdef int rc
        with nogil:
            rc = hs_hnsw_add(self.g, &X[0, 0], &slots[0], n, threads)
        self.high = max(self.high, hi + 1)
        _check(rc)

    def remove(self, const float[:, ::1] X, const int64_t[::1] slots, int threads=1):
        """Removes nodes (they stop being results now; links are repaired in batches)."""
        if slots.shape[0] == 0 or self.high == 0:
            return
        self._check_block(X, self.high)
        cdef int rc
        with nogil:
            rc = hs_hnsw_remove(self.g, &X[0, 0], &slots[0], slots.shape[0], threads)
        _check(rc)

    def repair(self, const float[:, ::1] X, int threads=1):
        """Repairs the links around removed nodes now and frees their slots."""
        if self.high == 0:
            return
        self._check_block(X, self.high)
        cdef int rc
        with nogil:
            rc = hs_hnsw_repair(self.g, &X[0, 0], threads)
        _check(rc)

    def search(self, const float[:, ::1] X, const float[:, ::1] Q, Py_ssize_t k, Py_ssize_t ef,
               const uint64_t[::1] bits=None, int mode=HS_HNSW_PLAIN, bint with_visits=False):
        """k nearest per query row -> (scores float32 (nq, k) best first, ids int64 (nq, k)),
        padded with -inf / -1; plus visits per query if with_visits."""
        cdef Py_ssize_t nq = Q.shape[0]
        if Q.shape[1] != self.dim:
            raise ValueError("query dimension %d does not match %d" % (Q.shape[1], self.dim))
        if k < 0 or ef < 0:
            raise ValueError("k and ef must be >= 0")
        if mode != HS_HNSW_PLAIN and mode != HS_HNSW_TWOHOP:
            raise ValueError("unknown search mode %d" % mode)
        if bits is not None and bits.shape[0] * 64 < self.high:
            raise ValueError("bitset is shorter than the graph")
        if nq == 0 or k == 0 or self.high == 0:
            scores = np.full((nq, k), -np.inf, dtype=np.float32)
            ids = np.full((nq, k), -1, dtype=np.int64)
            return (scores, ids, np.zeros(nq, dtype=np.int64)) if with_visits else (scores, ids)
        scores = np.empty((nq, k), dtype=np.float32)  # the kernel pads unused slots
        ids = np.empty((nq, k), dtype=np.int64)
        visits = np.zeros(nq, dtype=np.int64) if with_visits else _ONE_VISIT
        if X.shape[1] != self.dim or X.shape[0] < self.high:
            self._check_block(X, self.high)
        cdef float[:, ::1] s = scores
        cdef int64_t[:, ::1] r = ids
        cdef int64_t[::1] v = visits
        cdef const uint64_t *bp = &bits[0] if bits is not None and bits.shape[0] > 0 else NULL
        cdef int rc
        with nogil:
            rc = hs_hnsw_search(self.g, &X[0, 0], &Q[0, 0], nq, k, max(ef, k), bp, mode,
                                &s[0, 0], &r[0, 0], &v[0] if with_visits else NULL)
        _check(rc)
        return (scores, ids, visits) if with_visits else (scores, ids)

    def scan(self, const float[:, ::1] X, const float[:, ::1] Q, Py_ssize_t k,
             const uint64_t[::1] bits=None):
        """The exact k nearest per query row among the allowed nodes (bits; None: every node),
        as search() returns them, scanned on the int8 codes and re-scored on the float rows
        where a code's error bound leaves a row in doubt. None when the graph holds no codes
        or an allowed slot is not a node (the caller scans the float block instead)."""
        cdef Py_ssize_t nq = Q.shape[0]
        if Q.shape[1] != self.dim:
            raise ValueError("query dimension %d does not match %d" % (Q.shape[1], self.dim))
        if k < 0:
            raise ValueError("k must be >= 0")
        if bits is not None and bits.shape[0] * 64 < self.high:
            raise ValueError("bitset is shorter than the graph")
        scores = np.full((nq, k), -np.inf, dtype=np.float32)
        ids = np.full((nq, k), -1, dtype=np.int64)
        if nq == 0 or k == 0 or self.high == 0:
            return scores, ids
        if X.shape[1] != self.dim or X.shape[0] < self.high:
            self._check_block(X, self.high)
        cdef float[:, ::1] s = scores
        cdef int64_t[:, ::1] r = ids
        cdef const uint64_t *bp = &bits[0] if bits is not None and bits.shape[0] > 0 else NULL
        cdef int64_t nwords = bits.shape[0] if bits is not None else 0
        cdef int rc
        with nogil:
            rc = hs_hnsw_scan(self.g, &X[0, 0], &Q[0, 0], nq, k, bp, nwords, &s[0, 0], &r[0, 0])
        if rc == HS_EINVAL:
            return None
        _check(rc)
        return scores, ids

    def set_rescore(self, double eps0):
        """RaBitQ walks: eps0 of the error bound that picks the candidates rescored on float32
        (RaBitQ's 1.9 by default; larger reads more rows; inf: every candidate the walk kept)."""
        if not eps0 >= 0:
            raise ValueError("eps0 must be >= 0")
        hs_hnsw_set_rescore(self.g, eps0)

    @property
    def size(self):
        """Live nodes."""
        return hs_hnsw_count(self.g)

    @property
    def pending(self):
        """Removed nodes whose links are not repaired yet."""
        return hs_hnsw_pending(self.g)

    @property
    def nbytes(self):
        """Bytes held by the graph (links, levels, int8 codes); vectors are the caller's."""
        return hs_hnsw_nbytes(self.g)

    def level(self, int64_t slot):
        """Top level of a node, -1 if the slot is not a (live) node."""
        return hs_hnsw_level_of(self.g, slot)

    def links(self, int64_t slot, int level=0):
        """Neighbour slots of a node at a level."""
        out = np.empty(2 * self.m + 1, dtype=np.int32)
        cdef int32_t[::1] o = out
        cdef int c = hs_hnsw_links(self.g, slot, level, &o[0])
        if c < 0:
            raise KeyError(slot)
        return out[:c].copy()

    def to_bytes(self):
        """The graph structure (repair pending removals first)."""
        if hs_hnsw_pending(self.g):
            raise ValueError("repair() pending removals before serializing")
        cdef int64_t size = hs_hnsw_serialized_size(self.g)
        buf = bytearray(size)
        cdef uint8_t[::1] b = buf
        _check(hs_hnsw_serialize(self.g, &b[0], size))
        return bytes(buf)

    def export(self):
        """(meta, arrays) of the graph for a snapshot that is mapped back (see attach): the
        arrays are views of the graph's own memory, valid until its next write, except
        "upper" (the lists above level 0, gathered)."""
        cdef hs_hnsw_parts p
        if hs_hnsw_parts_get(self.g, &p) != HS_OK:
            raise ValueError("repair() pending removals before exporting")
        upper = np.empty(p.upper_len, dtype=np.int32)
        cdef int32_t[::1] u = upper
        if p.upper_len:
            _check(hs_hnsw_upper_get(self.g, &u[0], p.upper_len))
        meta = {"n": p.n, "count": p.count, "upper_len": p.upper_len, "metric": p.metric, "m": p.M,
                "ef_construct": p.efc, "quant": p.quant, "entry": p.entry, "max_level": p.max_level,
                "rng": p.rng}
        if p.rqcodes != NULL:
            meta["rq_trained"] = p.rq_trained
            meta["rq_format"] = RQ_FORMAT
        arrays = {"level": _view(self, p.level, cnp.NPY_INT8, p.n, 0),
                  "links0": _view(self, p.links0, cnp.NPY_INT32, p.n, 2 * p.M + 1),
                  "upper": upper}
        if p.inv != NULL:
            arrays["inv"] = _view(self, p.inv, cnp.NPY_FLOAT32, p.n, 0)
        if p.codes != NULL:
            arrays["codes"] = _view(self, p.codes, cnp.NPY_INT8, p.n, p.d)
            arrays["cscale"] = _view(self, p.cscale, cnp.NPY_FLOAT32, p.n, 0)
            arrays["csq"] = _view(self, p.csq, cnp.NPY_FLOAT32, p.n, 0)
        if p.rqcodes != NULL:
            arrays["rq_codes"] = _view(self, p.rqcodes, cnp.NPY_UINT8, p.n, _rq_row_bytes(p.d, p.quant))
            arrays["rq_centroid"] = _view(self, p.centroid, cnp.NPY_FLOAT32, p.rq_k, p.d).copy()
        return meta, arrays

    @staticmethod
    def attach(dict meta, dict arrays, int64_t dim, str metric="ip", int m=16, int ef_construct=200,
               str quantization="none"):
        """A graph over the arrays export() gave (e.g. views of a file mapped copy-on-write):
        they are used in place, not copied, and kept alive by the graph; written in place
        until the graph first grows. ValueError unless every field, shape and link checks out."""
        cdef hs_hnsw_parts p
        cdef int q = _QUANT[quantization]
        cdef int mt = _HNSW_METRICS[metric]
        try:
            n, upper_len = int(meta["n"]), int(meta["upper_len"])
            p.n, p.count, p.upper_len = n, int(meta["count"]), upper_len
            p.metric, p.M, p.efc, p.quant = int(meta["metric"]), int(meta["m"]), int(meta["ef_construct"]), int(meta["quant"])
            p.entry, p.max_level, p.rng = int(meta["entry"]), int(meta["max_level"]), int(meta["rng"])
        except (KeyError, TypeError, ValueError, OverflowError):
            raise ValueError("graph: bad snapshot header") from None
        if p.M != m:
            raise ValueError("the graph was built with m=%d, not %d" % (p.M, m))
        p.d = dim
        held = {}

        def want(str name, dtype, tuple shape):
            a = arrays.get(name)
            if not isinstance(a, np.ndarray) or a.dtype != dtype or a.shape != shape:
                raise ValueError("graph: array %s is missing or has the wrong type or shape" % name)
            if not a.flags.c_contiguous or not a.flags.writeable:
                raise ValueError("graph: array %s must be C-contiguous and writable" % name)
            held[name] = a
            return a

        if n < 0 or upper_len < 0:
            raise ValueError("graph: bad snapshot header")
        p.level = <int8_t *>_data(want("level", np.int8, (n,)))
        p.links0 = <int32_t *>_data(want("links0", np.int32, (n, 2 * m + 1)))
        upper = np.ascontiguousarray(want("upper", np.int32, (upper_len,)))
        p.inv = <float *>_data(want("inv", np.float32, (n,))) if mt == HS_METRIC_COSINE else NULL
        p.codes = p.cscale = p.csq = NULL
        p.rqcodes = NULL
        p.centroid = NULL
        p.rq_trained = 0
        if q >= HS_HNSW_Q_RQ1:
            try:
                p.rq_trained = int(meta["rq_trained"])
            except (KeyError, TypeError, ValueError, OverflowError):
                raise ValueError("graph: bad snapshot header (rq_trained)") from None
            if meta.get("rq_format", 1) != RQ_FORMAT:
                raise ValueError("graph: its RaBitQ codes are of format %r and this version reads format %d; "
                                 "copy the documents into a new collection to rebuild them"
                                 % (meta.get("rq_format"), RQ_FORMAT))
            p.rqcodes = <uint8_t *>_data(want("rq_codes", np.uint8, (n, _rq_row_bytes(dim, q))))
            centroid = arrays.get("rq_centroid")
            if not isinstance(centroid, np.ndarray) or centroid.dtype != np.float32 or centroid.ndim != 2 \
                    or centroid.shape[1] != dim or not 1 <= centroid.shape[0] <= 64:
                raise ValueError("graph: array rq_centroid is missing or has the wrong type or shape")
            p.rq_k = centroid.shape[0]
            centroid = np.ascontiguousarray(centroid)
            held["rq_centroid"] = centroid
            p.centroid = <float *>_data(centroid)
        elif q:
            p.codes = <int8_t *>_data(want("codes", np.int8, (n, dim)))
            p.cscale = <float *>_data(want("cscale", np.float32, (n,)))
            p.csq = <float *>_data(want("csq", np.float32, (n,)))
        cdef const int32_t *up = <const int32_t *>_data(upper)
        cdef int err = 0
        cdef hs_hnsw *g = NULL
        with nogil:
            g = hs_hnsw_attach(&p, up, dim, mt, q, &err)
        if g == NULL:
            if err == HS_ENOMEM:
                raise MemoryError("could not allocate the HNSW graph")
            raise ValueError("not a valid HNSW graph of dimension %d, metric %s, quantization %s"
                             % (dim, metric, quantization))
        cdef HnswIndex idx = HnswIndex(dim, metric, m, ef_construct, 0x5EED, quantization)
        hs_hnsw_free(idx.g)
        idx.g = g
        idx.high = idx.cap = n
        idx._borrowed = held
        return idx

    @staticmethod
    def from_bytes(const uint8_t[::1] data, const float[:, ::1] X, int64_t dim, str metric="ip",
                   int m=16, int ef_construct=200, str quantization="none"):
        """Rebuilds a graph saved by to_bytes; ValueError if the bytes are not a valid graph
        of this dimension / metric / quantization (every link is checked before use)."""
        if data.shape[0] == 0:
            raise ValueError("empty graph data")
        cdef int err = 0
        cdef hs_hnsw *g = NULL
        cdef int q = _QUANT[quantization]
        cdef int mt = _HNSW_METRICS[metric]
        with nogil:
            g = hs_hnsw_deserialize(&data[0], data.shape[0], dim, mt, q, &err)
        if g == NULL:
            if err == HS_ENOMEM:
                raise MemoryError("could not allocate the HNSW graph")
            raise ValueError("not a valid HNSW graph of dimension %d, metric %s" % (dim, metric))
        if hs_hnsw_m(g) != m:
            hs_hnsw_free(g)
            raise ValueError("the graph was built with m=%d, not %d" % (hs_hnsw_m(g), m))
        cdef HnswIndex idx = HnswIndex(dim, metric, m, ef_construct, 0x5EED, quantization)
        hs_hnsw_free(idx.g)
        idx.g = g
        idx.high = hs_hnsw_slots(g)
        idx.cap = idx.high
        if idx.high > 0:
            idx._check_block(X, idx.high)
            _check(hs_hnsw_requantize(g, &X[0, 0]))
        return idx
