# Lexicon: the Python face of kernels/hs_lexicon.c (included into _kernels.pyx after invindex.pxi).

from cpython.unicode cimport PyUnicode_DecodeUTF8

from libc.string cimport memset

cdef uint8_t _NO_TEXT = 0


cdef tuple _batch_args(const uint8_t[::1] buf, const int64_t[::1] offs, const uint8_t[::1] presplit):
    """Checks a batch's shapes and spans (C trusts them) -> (n, nbytes)."""
    cdef Py_ssize_t n = presplit.shape[0], i
    if offs.shape[0] != n + 1:
        raise ValueError("offs needs one more entry than presplit")
    if offs[0] < 0 or offs[n] > buf.shape[0]:
        raise ValueError("offs run outside the buffer")
    for i in range(n):
        if offs[i] > offs[i + 1]:
            raise ValueError("offs must not decrease")
    return n, offs[n] - offs[0]


cdef list _new_words(const hs_lex_batch *b):
    """The batch's new words as str (UTF-8, lone surrogates kept as Python keeps them)."""
    cdef int64_t j
    return [PyUnicode_DecodeUTF8(<const char *>b.new_buf + b.new_offs[j], b.new_offs[j + 1] - b.new_offs[j],
                                 "surrogatepass") for j in range(b.nnew)]


cdef class Lexicon:
    """One text field's surface words (as the analyzer writes them, before stemming) -> term
    ids, and the tokenizer that turns a batch of texts into term ids without Python per token.
    A text is ASCII (split at every byte that is not [0-9A-Za-z], lowercased if asked) or
    presplit (the analyzer's words joined by spaces); see kernels/hs_lexicon.h."""
    cdef hs_lex *lx

    def __cinit__(self):
        self.lx = hs_lex_new()
        if self.lx == NULL:
            raise MemoryError("could not allocate the lexicon")

    def __dealloc__(self):
        if self.lx != NULL:
            hs_lex_free(self.lx)
            self.lx = NULL

    def __len__(self):
        return hs_lex_size(self.lx)

    def get(self, bytes word):
        """The term id of a word (UTF-8), or -1."""
        cdef const uint8_t *p = <const uint8_t *><char *>word
        return hs_lex_get(self.lx, p, len(word))

    def put(self, const uint8_t[::1] buf, const int64_t[::1] offs, const int32_t[::1] ids):
        """Sets word i = buf[offs[i]:offs[i+1]] to id ids[i] (>= 0)."""
        cdef Py_ssize_t n = ids.shape[0]
        if offs.shape[0] != n + 1:
            raise ValueError("offs needs one more entry than ids")
        if n == 0:
            return
        if offs[0] < 0 or offs[n] > buf.shape[0]:
            raise ValueError("offs run outside the buffer")
        cdef const uint8_t *bp = &buf[0] if buf.shape[0] else &_NO_TEXT
        cdef int rc
        with nogil:
            rc = hs_lex_put(self.lx, bp, &offs[0], &ids[0], n)
        _check(rc)

    def tokenize(self, const uint8_t[::1] buf, const int64_t[::1] offs, const uint8_t[::1] presplit,
                 bint lowercase=True):
        """(tids int32, doc_offs int64, new words): a word not in the lexicon has the id -1 - j,
        j its place in the list of new words (each once, in order of first occurrence). Reads
        only: indexing goes through add_to."""
        cdef hs_lex_batch b
        memset(&b, 0, sizeof(b))
        cdef Py_ssize_t n
        cdef int64_t nbytes
        n, nbytes = _batch_args(buf, offs, presplit)
        cdef const uint8_t *bp = &buf[0] if buf.shape[0] else &_NO_TEXT
        cdef const uint8_t *pp = &presplit[0] if n else &_NO_TEXT
        cdef int rc
        try:
            with nogil:
                rc = hs_lex_tokenize(self.lx, bp, &offs[0], pp, n, lowercase, &b)
            _check(rc)
            tids = np.empty(b.ntok, dtype=np.int32)
            doc_offs = np.empty(n + 1, dtype=np.int64)
            if b.ntok:
                memcpy(cnp.PyArray_DATA(tids), b.tids, b.ntok * sizeof(int32_t))
            memcpy(cnp.PyArray_DATA(doc_offs), b.doc_offs, (n + 1) * sizeof(int64_t))
            return tids, doc_offs, _new_words(&b)
        finally:
            hs_lex_batch_free(&b)

    def add_to(self, InvertedIndex index, const int64_t[::1] slots, const uint8_t[::1] buf,
               const int64_t[::1] offs, const uint8_t[::1] presplit, bint lowercase, new_ids):
        """Indexes text i of the batch as slot slots[i] into `index`, in one pass: tokenise and
        look every word up in C; call new_ids(words) once with the batch's unseen words (str,
        each once) for their term ids; then add the postings. -> the number of new words.
        If new_ids raises, neither the lexicon nor the index changes."""
        cdef hs_lex_batch b
        memset(&b, 0, sizeof(b))
        cdef Py_ssize_t n
        cdef int64_t nbytes
        n, nbytes = _batch_args(buf, offs, presplit)
        if slots.shape[0] != n:
            raise ValueError("one slot per text")
        if n == 0:
            return 0
        cdef const uint8_t *bp = &buf[0] if buf.shape[0] else &_NO_TEXT
        cdef int32_t[::1] ids
        cdef const int32_t *ip = NULL
        cdef bint release = nbytes >= NOGIL_MIN_WORK
        cdef int rc
        try:
            if release:
                with nogil:
                    rc = hs_lex_tokenize(self.lx, bp, &offs[0], &presplit[0], n, lowercase, &b)
            else:
                rc = hs_lex_tokenize(self.lx, bp, &offs[0], &presplit[0], n, lowercase, &b)
            _check(rc)
            if b.nnew:
                ids = np.ascontiguousarray(new_ids(_new_words(&b)), dtype=np.int32)
                if ids.shape[0] != b.nnew:
                    raise ValueError("new_ids must give one id per new word")
                ip = &ids[0]
            if release:
                with nogil:
                    rc = _resolve_and_add(self.lx, &b, ip, index.ix, &slots[0], n)
            else:
                rc = _resolve_and_add(self.lx, &b, ip, index.ix, &slots[0], n)
            _check(rc)
            return b.nnew
        finally:
            hs_lex_batch_free(&b)


cdef int _resolve_and_add(hs_lex *lx, hs_lex_batch *b, const int32_t *ids, hs_inv *ix, const int64_t *slots,
                          int64_t n) noexcept nogil:
    cdef int rc = HS_OK
    if b.nnew:
        rc = hs_lex_resolve(lx, b, ids)
    if rc == HS_OK:
        rc = hs_inv_add(ix, slots, n, b.tids if b.ntok else _EMPTY_I32, b.doc_offs)
    return rc
