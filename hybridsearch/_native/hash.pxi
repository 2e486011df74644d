# The stable string hash of kernels/hs_hash.c (ids in saved id maps).

cdef uint8_t _NO_BYTE = 0


def hash_bytes(const uint8_t[::1] data):
    """Stable 64-bit hash (as int64) of one byte string."""
    if data.shape[0] == 0:
        return <int64_t>hs_hash_bytes(&_NO_BYTE, 0)
    return <int64_t>hs_hash_bytes(&data[0], data.shape[0])


def hash_spans(const uint8_t[::1] data, const int64_t[::1] start, const int32_t[::1] length):
    """Stable hash of each span data[start[i] : start[i] + length[i]] (length -1: empty) -> int64 array."""
    cdef Py_ssize_t n = start.shape[0]
    if length.shape[0] != n:
        raise ValueError("one length per start")
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    cdef int64_t[::1] o = out
    cdef const uint8_t *p = &data[0] if data.shape[0] else &_NO_BYTE
    cdef int64_t size = data.shape[0]
    cdef int rc
    with nogil:
        rc = hs_hash_spans(p, size, &start[0], &length[0], n, &o[0])
    if rc != HS_OK:
        raise ValueError("hash_spans: a span runs outside the buffer")
    return out
