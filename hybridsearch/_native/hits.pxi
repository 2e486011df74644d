def all_finite(const float[::1] x):
    """True when no element is NaN or +-inf."""
    # the GIL is kept: a query vector is checked in well under a microsecond, less than
    # releasing and re-taking the GIL costs under contention
    cdef Py_ssize_t i, n = x.shape[0]
    cdef float acc = 0
    for i in range(n):
        acc += x[i] * 0  # 0 for a finite value, NaN for NaN and +-inf
    return acc == 0
