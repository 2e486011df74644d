# Result assembly: slots of a search turned into ids and documents in one call per batch,
# because doing it in Python costs more per query than a small graph walk does.

def hits_of_rows(rows, scores, list ids, list docs):
    """[(ids, scores, docs)] per query row of `rows` (int64 slots, -1 padding at the end)
    and `scores` (float32, same shape), looking slots up in the store's `ids` / `docs` lists."""
    cdef const int64_t[:, ::1] r = rows
    cdef Py_ssize_t nq = r.shape[0], k = r.shape[1], cap = len(ids), i, j, n
    cdef int64_t s
    if scores.shape[0] != nq or scores.shape[1] != k:
        raise ValueError("rows and scores differ in shape")
    if len(docs) != cap:
        raise ValueError("ids and docs differ in length")
    out = []
    for i in range(nq):
        n = 0
        while n < k and r[i, n] >= 0:
            n += 1
        hit_ids = []
        hit_docs = []
        for j in range(n):
            s = r[i, j]
            if s >= cap:
                raise ValueError("slot %d is beyond the store (%d rows)" % (s, cap))
            hit_ids.append(ids[s])
            hit_docs.append(docs[s])
        out.append((hit_ids, scores[i, :n], hit_docs))
    return out


def all_finite(const float[::1] x):
    """True when no element is NaN or +-inf."""
    # the GIL is kept: a query vector is checked in well under a microsecond, less than
    # releasing and re-taking the GIL costs under contention
    cdef Py_ssize_t i, n = x.shape[0]
    cdef float acc = 0
    for i in range(n):
        acc += x[i] * 0  # 0 for a finite value, NaN for NaN and +-inf
    return acc == 0
