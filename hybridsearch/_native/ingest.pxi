# The ingest builders of kernels/hs_ingest.c, and the one loop over Python strings a batch
# needs (encode_strs): the per-row Python work of a batch write, done once per batch.

from cpython.unicode cimport PyUnicode_AsUTF8String
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject
from libc.stdlib cimport realloc

cdef extern from "Python.h":
    bint PyUnicode_CheckExact(object o)
    bint PyUnicode_IS_ASCII(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)


def encode_strs(list values):
    """(blob uint8, start int64, length int32, bad): the UTF-8 bytes of every value end to end
    (length -1 for None). bad is -1, or the first row whose value is neither an exact str nor
    None, or has no UTF-8 form (a lone surrogate); then blob, start and length are None."""
    cdef Py_ssize_t n = PyList_GET_SIZE(values), i
    cdef size_t cap = 1 << 16, used = 0, need
    cdef const char *src
    cdef Py_ssize_t size
    cdef uint8_t *buf = <uint8_t *>malloc(cap)
    cdef uint8_t *grown
    if buf == NULL:
        raise MemoryError("encode_strs: out of memory")
    start = np.empty(n, dtype=np.int64)
    length = np.empty(n, dtype=np.int32)
    cdef int64_t[::1] st = start
    cdef int32_t[::1] ln = length
    cdef object v
    cdef bytes enc
    try:
        for i in range(n):
            v = <object>PyList_GET_ITEM(values, i)
            if v is None:
                st[i] = used
                ln[i] = -1
                continue
            if not PyUnicode_CheckExact(v):
                return None, None, None, i
            if PyUnicode_IS_ASCII(v):  # a byte per character: the str's own buffer is its UTF-8
                src = <const char *>PyUnicode_DATA(v)
                size = PyUnicode_GET_LENGTH(v)
            else:
                try:
                    enc = PyUnicode_AsUTF8String(v)
                except UnicodeEncodeError:
                    return None, None, None, i
                src = PyBytes_AS_STRING(enc)
                size = PyBytes_GET_SIZE(enc)
            if size > 0x7FFFFFFF:
                return None, None, None, i
            need = used + <size_t>size
            if need > cap:
                while cap < need:
                    cap *= 2
                grown = <uint8_t *>realloc(buf, cap)
                if grown == NULL:
                    raise MemoryError("encode_strs: out of memory")
                buf = grown
            memcpy(buf + used, src, <size_t>size)
            st[i] = used
            ln[i] = <int32_t>size
            used = need
        blob = np.empty(used, dtype=np.uint8)
        if used:
            memcpy(<void *>cnp.PyArray_DATA(blob), buf, used)
        return blob, start, length, -1
    finally:
        free(buf)


cdef const uint8_t *_bytes_at(const uint8_t[::1] data):
    return &data[0] if data.shape[0] else &_NO_BYTE


def group_spans(const uint8_t[::1] data, const int64_t[::1] start, const int32_t[::1] length):
    """(hashes int64, group int32, first int64, last int64) of the spans: equal strings share a
    group, numbered by first appearance (-1: a missing string); first / last: the first and
    last row of each group (arrays as long as the number of groups)."""
    cdef Py_ssize_t n = start.shape[0]
    if length.shape[0] != n:
        raise ValueError("one length per start")
    hashes = np.empty(n, dtype=np.int64)
    group = np.empty(n, dtype=np.int32)
    first = np.empty(max(n, 1), dtype=np.int64)
    last = np.empty(max(n, 1), dtype=np.int64)
    if n == 0:
        return hashes, group, first[:0], last[:0]
    cdef int64_t[::1] h = hashes, f = first, l = last
    cdef int32_t[::1] g = group
    cdef const uint8_t *p = _bytes_at(data)
    cdef int64_t size = data.shape[0], count
    with nogil:
        count = hs_group_spans(p, size, &start[0], &length[0], n, &h[0], &g[0], &f[0], &l[0])
    if count < 0:
        _check(<int>count)
    return hashes, group, first[:count], last[:count]


def spans_equal(const uint8_t[::1] a, const int64_t[::1] astart, const int32_t[::1] alen,
                const uint8_t[::1] b, const int64_t[::1] bstart, const int32_t[::1] blen):
    """bool array: span i of a holds the same bytes as span i of b."""
    cdef Py_ssize_t n = astart.shape[0]
    if alen.shape[0] != n or bstart.shape[0] != n or blen.shape[0] != n:
        raise ValueError("spans_equal: one start and one length per span on both sides")
    out = np.empty(n, dtype=np.uint8)
    if n == 0:
        return out.view(np.bool_)
    cdef uint8_t[::1] o = out
    cdef int rc
    cdef const uint8_t *pa = _bytes_at(a)
    cdef const uint8_t *pb = _bytes_at(b)
    with nogil:
        rc = hs_spans_equal(pa, a.shape[0], &astart[0], &alen[0], pb, b.shape[0], &bstart[0], &blen[0], n, &o[0])
    _check(rc)
    return out.view(np.bool_)


def rows_norm2(const float[:, ::1] x):
    """(norm2 float64 per row, first row holding NaN or inf or -1) of a C-contiguous float32 block."""
    cdef Py_ssize_t n = x.shape[0], d = x.shape[1]
    out = np.empty(n, dtype=np.float64)
    if n == 0:
        return out, -1
    cdef double[::1] o = out
    cdef int64_t bad
    with nogil:
        bad = hs_rows_norm2(&x[0, 0], n, d, &o[0])
    return out, bad


def sort_pairs(int64_t[::1] keys, int64_t[::1] vals):
    """Sorts keys (int64, signed order) and carries vals along, stable, in place (radix sort)."""
    cdef Py_ssize_t n = keys.shape[0]
    if vals.shape[0] != n:
        raise ValueError("sort_pairs: one value per key")
    if n < 2:
        return
    cdef int rc
    with nogil:
        rc = hs_sort_pairs(&keys[0], &vals[0], n)
    _check(rc)
