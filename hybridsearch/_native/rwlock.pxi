# RWLock: the Python face of kernels/hs_rwlock.c (included into _kernels.pyx).
#
# A reader that can enter at once does so with the GIL held (a mutex held for a few
# instructions: ~50 ns against ~2 us for a lock written in Python); anything that may wait
# releases the GIL first, so a writer waiting for readers never stops them from finishing.


cdef class _ReadGuard:
    """`with lock.read():` (a C-level context manager: no Python frame per enter and exit)."""
    cdef RWLock lock

    def __enter__(self):
        self.lock.acquire_read()

    def __exit__(self, *exc):
        hs_rwlock_read_unlock(&self.lock.l)


cdef class _WriteGuard:
    """`with lock.write():`."""
    cdef RWLock lock

    def __enter__(self):
        self.lock.acquire_write()

    def __exit__(self, *exc):
        hs_rwlock_write_unlock(&self.lock.l)


cdef class RWLock:
    """A phase-fair reader-writer lock: readers share it; a writer waits for them and blocks new
    readers; a leaving writer lets the readers waiting for it in before the next writer."""
    cdef hs_rwlock l
    cdef _ReadGuard _read
    cdef _WriteGuard _write

    def __cinit__(self):
        _check(hs_rwlock_init(&self.l))
        self._read = _ReadGuard.__new__(_ReadGuard)
        self._read.lock = self
        self._write = _WriteGuard.__new__(_WriteGuard)
        self._write.lock = self

    def __dealloc__(self):
        hs_rwlock_destroy(&self.l)

    def read(self):
        """`with lock.read():` shares the lock with other readers."""
        return self._read

    def write(self):
        """`with lock.write():` holds the lock alone."""
        return self._write

    cpdef acquire_read(self):
        """Holds the lock for reading (release with release_read); waits without the GIL."""
        if not hs_rwlock_try_read(&self.l):
            with nogil:
                hs_rwlock_read(&self.l)

    def release_read(self):
        hs_rwlock_read_unlock(&self.l)

    cpdef acquire_write(self):
        """Holds the lock alone (release with release_write); waits without the GIL."""
        with nogil:
            hs_rwlock_write(&self.l)

    def release_write(self):
        hs_rwlock_write_unlock(&self.l)

    @property
    def generation(self):
        """Bumped by every writer on entry: a reader may keep what it derived from the data (a
        filter's bitset) for as long as the generation it read under is current."""
        return self.l.generation

    @property
    def waiting_writers(self):
        """Writers waiting for the lock (for tests that must act once a writer waits)."""
        return self.l.waiting_writers
