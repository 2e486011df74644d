def all_finite(const float[::1] x):
    """True when no element is NaN or +-inf."""
    # the GIL is kept: a query vector is checked in well under a microsecond, less than
    # releasing and re-taking the GIL costs under contention
    cdef Py_ssize_t i, n = x.shape[0]
    cdef float acc = 0
    for i in range(n):
        acc += x[i] * 0  # 0 for a finite value, NaN for NaN and +-inf
    return acc == 0


ctypedef fused _real:
    float
    double


def sum_squares(const _real[::1] x):
    """The sum of the squares of x in double (NaN or inf when an element is not finite): one
    pass that checks a query vector's finiteness and norm at once, without numpy's warnings."""
    # the GIL is kept, as in all_finite: a query is read in well under a microsecond
    cdef Py_ssize_t i, n = x.shape[0]
    cdef double acc = 0, v
    for i in range(n):
        v = x[i]
        acc += v * v
    return acc
